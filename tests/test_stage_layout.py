"""The step's layout by stage (docs/architecture.md, "The data path of one step"): every module of
``convexsim/stepping`` has one role, the compiled stages live in files named for them, the compositions only
compose, and the ideas that used to be written once per step variant have one home each.

Read from the source (ast), nothing is run: these are contracts on where code lives, not on what it
computes (the physics and round-off tests hold that).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

STEPPING = Path(__file__).resolve().parents[1] / "convexsim" / "stepping"

STAGES = {
    "packing": "the model as flat arrays and settings slots",
    "status": "the compiled steps' status codes",
    "contacts": "start checks, collision, margins, pair-reach and tree-pair filters, contact frames, materials",
    "free_motion": "A and v* of bodies and trees",
    "jacobians": "contact Jacobians of bodies and links, block and dense layouts",
    "sap_rows": "the SAP problem's cliques, contact parameters and joint rows",
    "lcp_rows": "the LCP's rows: gap terms, PD fold, limit and coupler rows, the dense (M, q)",
    "lcp_solve": "islands, A⁻¹, Lemke runs",
    "post_solve": "impulses to forces, velocities back into v, joint forces",
    "integration": "q, v at t + dt and the end-of-step check",
    "recording": "frames and statistics of the run loops",
}
"""Stage modules: compiled kernels (numba) of one stage each, beside or called by their numpy references."""

COMPOSITIONS = {"sap_composition": "sap", "lcp_composition": "lcp"}
"""The compiled compositions, one module per solver."""

RUNNERS = {"compiled": "sap", "lcp_compiled": "lcp"}
"""Python entry points of the compiled steps: a kernel's status into a result, a Handoff or an error."""

REFERENCES = {"sap_stepper": "sap", "lcp_reference": "lcp", "lcp_problem": "lcp", "lcp_islands": "lcp",
              "lcp_fallback": "lcp"}
"""The numpy reference steps (the tests' oracles) and their pieces (the LCP's (M, q), its island solve with warm
and crash starts, the fallback chain); the numpy stages both references take (assembly, contacts, Jacobians,
body-constraint rows, integration) live beside their kernels in the stage modules."""

PLUMBING = {"__init__", "dispatch", "context", "types", "lcp_info"}
"""The public entry point, the runner table, the step context and the result types."""

MAX_KERNEL_LINES = 80
"""Longest compiled kernel of ``stepping/`` in lines of code (its docstring not counted)."""


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(STEPPING.glob("*.py"))}


def _tree(name: str) -> ast.Module:
    return ast.parse(_modules()[name].read_text(encoding="utf-8"))


def _is_kernel(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for d in node.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if isinstance(f, ast.Name) and f.id == "jit":
            return True
    return False


def _kernels(name: str) -> list[ast.FunctionDef]:
    return [n for n in _tree(name).body if _is_kernel(n)]


def _imported_stepping_modules(name: str) -> set[str]:
    """The ``convexsim.stepping`` submodules that module ``name`` imports (function-local imports included)."""
    out = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("convexsim.stepping."):
                out.add(node.module.split(".")[2])
            elif node.module == "convexsim.stepping":
                out |= {a.name for a in node.names if a.name in _modules()}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("convexsim.stepping.")}
    return out


def _code_lines(fn: ast.FunctionDef) -> int:
    n = fn.end_lineno - fn.lineno + 1
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        n -= first.end_lineno - first.lineno + 1
    return n


def test_every_stepping_module_has_one_role():
    """Each file of ``stepping/`` is a stage, a composition, a runner, a reference or plumbing, and only one;
    a new file must be placed in this table (and in docs/architecture.md's)."""
    roles = [set(STAGES), set(COMPOSITIONS), set(RUNNERS), set(REFERENCES), PLUMBING]
    for i, a in enumerate(roles):
        for b in roles[i + 1:]:
            assert not a & b, a & b
    assert set(_modules()) == set().union(*roles), set(_modules()) ^ set().union(*roles)


def test_one_compiled_composition_per_solver():
    """The compiled steps are composed in one module per solver, and every runner of a solver calls its
    solver's composition."""
    assert sorted(COMPOSITIONS.values()) == ["lcp", "sap"]
    for runner, solver in RUNNERS.items():
        used = _imported_stepping_modules(runner) & set(COMPOSITIONS)
        assert used == {c for c, s in COMPOSITIONS.items() if s == solver}, (runner, used)


def _inlined(fn: ast.FunctionDef) -> bool:
    """Whether a kernel is inlined into its callers (``jit(inline="always")``): not an entry point of its own."""
    return any(isinstance(d, ast.Call) and any(k.arg == "inline" for k in d.keywords) for d in fn.decorator_list)


def test_one_compiled_sap_step_for_every_model():
    """Free bodies and trees take one compiled SAP composition (a free-body model is a forest of zero trees,
    specialized by model kind where numba compiles it): its entry points are one prepare/finish pair (finish's
    stages inlined into the run loop, ``finish_stages``) and one run loop; that run loop is the only kernel of
    ``stepping/`` that records frames; one runner calls it."""
    kernels = {k.name: k for k in _kernels("sap_composition")}
    assert {"step_prepare", "step_finish", "finish_stages", "run_kernel"} <= set(kernels)
    entries = {name for name, k in kernels.items() if not _inlined(k)}
    assert entries == {"step_prepare", "step_finish", "run_kernel"}, entries
    assert "finish_stages(" in ast.unparse(kernels["run_kernel"]) and "step_finish(" not in ast.unparse(
        kernels["run_kernel"])
    recorders = {(m, k.name) for m in _modules() for k in _kernels(m) if k.name != "record_frame" and "record_frame(" in ast.unparse(k)}
    assert recorders == {("sap_composition", "run_kernel")}, recorders
    assert [r for r, solver in RUNNERS.items() if solver == "sap"] == ["compiled"]


def test_kernels_live_in_stages_and_compositions_only():
    """Compiled kernels are stage or composition code: runners, references and plumbing define none."""
    for name in _modules():
        if name not in STAGES and name not in COMPOSITIONS:
            assert not _kernels(name), (name, [k.name for k in _kernels(name)])


def test_no_kernel_is_long():
    """No compiled kernel of ``stepping/`` is longer than MAX_KERNEL_LINES lines of code: the long step bodies
    are split into stage calls."""
    long = [(name, k.name, _code_lines(k)) for name in _modules() for k in _kernels(name)
            if _code_lines(k) > MAX_KERNEL_LINES]
    assert not long, long


def test_compositions_only_compose_stages():
    """A composition imports stages (and the solver's Newton loop from ``sap``), never a runner, a reference or
    the other solver's composition; a stage imports only stages (and the error types), no composition, runner
    or reference."""
    for comp in COMPOSITIONS:
        assert _imported_stepping_modules(comp) <= set(STAGES), (comp, _imported_stepping_modules(comp))
    for stage in STAGES:
        bad = _imported_stepping_modules(stage) - set(STAGES) - {"types"}      # types: the errors a stage raises
        assert not bad, (stage, bad)


REFERENCE_SHARING_PENDING: set = set()
"""Numpy reference steps that still import the other solver's reference for the numpy stages they share: none
left (the assembly, contact set, Jacobian rows, body-constraint rows and integration that both take are stage
code); the set only shrinks."""


def test_no_module_of_one_solver_imports_the_other_solvers_step():
    """An LCP composition or runner imports no SAP step and the other way round (what both share is a stage);
    among the numpy references only the pending pairs of REFERENCE_SHARING_PENDING remain."""
    solver_of = {**COMPOSITIONS, **RUNNERS, **REFERENCES}
    found = set()
    for name, solver in solver_of.items():
        other = {m for m, s in solver_of.items() if s != solver}
        found |= {(name, m) for m in _imported_stepping_modules(name) & other}
    compiled_side = {(a, b) for a, b in found if a in COMPOSITIONS or a in RUNNERS}
    assert not compiled_side, compiled_side
    assert found <= REFERENCE_SHARING_PENDING, found - REFERENCE_SHARING_PENDING


def _sources_matching(pattern: str) -> set[str]:
    rx = re.compile(pattern)
    return {name for name, p in _modules().items() if rx.search(p.read_text(encoding="utf-8"))}


def test_one_home_for_the_contact_jacobians():
    """Only ``jacobians`` assembles contact Jacobians from the side blocks (``dynamics.jacobian_block`` of a
    body, R_WCᵀ J_P of a link by ``multibody.kinematics.path_point_jacobian``), in both layouts."""
    assert _sources_matching(r"\bjacobian_block\(") == {"jacobians"}
    assert _sources_matching(r"\bpath_point_jacobian\(") == {"jacobians"}
    assert _sources_matching(r"R_?\w*\[c, 0, r\] \* Jp\[0, j\]|R\[0, r\] \* Jp\[0, j\]") == {"jacobians"}


def test_one_home_for_the_material_rules():
    """The combination rules (k in series, τ_d summed, μ harmonic) are written once, in ``contacts``; every
    other module calls ``combine_materials`` or ``combined_friction``."""
    assert _sources_matching(r"2 \* \w+ \* \w+ / \w+") == {"contacts"}
    assert _sources_matching(r"\w+ \* \w+ / ksum") == {"contacts"}


def test_one_home_for_the_post_solve_bookkeeping_and_the_status_codes():
    """Impulses to world forces (R_WC γ / dt) are computed only in ``post_solve``; the status codes are
    assigned only in ``status``."""
    assert _sources_matching(r"R_WC\[c, i, 0\] \* gamma\[c, 0\]") == {"post_solve"}
    assigned = {name for name, p in _modules().items()
                if re.search(r"(?m)^(STEP|RUN|LCP)_[A-Z_]+ = -?\d", p.read_text(encoding="utf-8"))}
    assert assigned == {"status"}, assigned
