"""Module layering of convexsim: no import cycles, solver packages stay pure math, the core never
imports the viewer. Import edges are read from the source (every ``import`` statement, at any depth,
including function-local and TYPE_CHECKING imports), so a cycle hidden behind a local import counts.
"""

from __future__ import annotations

import ast
from pathlib import Path
import pytest

from repo_paths import REPO as ROOT
PACKAGE_DIRS = {"convexsim": ROOT / "convexsim", "convexsim.viz": ROOT / "viz"}


def _modules() -> dict[str, Path]:
    """Every module name of convexsim (viz mapped to convexsim.viz) -> its file."""
    out = {}
    for pkg, base in PACKAGE_DIRS.items():
        for f in base.rglob("*.py"):
            parts = list(f.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = f
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest module prefix of a dotted name that is one of ours."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        cand = ".".join(parts[:k])
        if cand in modules:
            return cand
    return None


def import_graph() -> dict[str, set[str]]:
    """Edges module -> imported module (ours only)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg_parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    pkg_parts = pkg_parts[:len(pkg_parts) - (node.level - 1)]
                    base = ".".join(pkg_parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                r = _resolve(t, modules)
                if r is not None and r != mod:
                    graph[mod].add(r)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_graph_reader_sees_a_known_edge():
    """The reader itself works: the SAP stepper imports the SAP package, the CLI reaches the viewer."""
    g = import_graph()
    assert "convexsim.sap" in g["convexsim.stepping.sap_stepper"]
    assert any(t.startswith("convexsim.viz") for t in g["convexsim.cli.run"])


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(import_graph()) == []


SOLVER_PACKAGES = ("convexsim.sap", "convexsim.lcp", "convexsim.geometry")
FORBIDDEN_FOR_SOLVERS = ("convexsim.scene", "convexsim.cli", "convexsim.studies", "convexsim.viz",
                         "convexsim.stepping", "convexsim.simulate", "convexsim.learn", "convexsim.tools")


@pytest.mark.parametrize("solver", SOLVER_PACKAGES)
def test_solver_packages_import_no_higher_layer(solver):
    g = import_graph()
    bad = {(m, t) for m, ts in g.items() if m == solver or m.startswith(solver + ".")
           for t in ts if t.startswith(FORBIDDEN_FOR_SOLVERS)}
    assert not bad, f"{solver} imports higher layers: {sorted(bad)}"


TOOLS = "convexsim.tools"
TOOL_USERS = {"convexsim.cli": None, "convexsim.simulate": {"convexsim.tools.kernels"}}
"""Who may import the tools (``convexsim.tools``: benchmarks, engine comparison, warm-up, kernel bookkeeping):
the CLI, which runs them, and ``simulate``, which times a run's compilation with ``kernels.KernelClock``."""


def test_only_the_cli_imports_the_tools():
    """The tools sit on top: besides themselves, only the CLI imports them (and ``simulate`` the kernel clock)."""
    g = import_graph()

    def allowed(m, t):
        user = next((u for u in TOOL_USERS if m == u or m.startswith(u + ".")), None)   # the CLI: a package
        return user is not None and (TOOL_USERS[user] is None or t in TOOL_USERS[user])

    bad = {(m, t) for m, ts in g.items() if not (m == TOOLS or m.startswith(TOOLS + "."))
           for t in ts if (t == TOOLS or t.startswith(TOOLS + ".")) and not allowed(m, t)}
    assert not bad, sorted(bad)


def test_the_lemke_package_is_layered():
    """Inside ``convexsim.lcp.lemke`` the kernels (tableau, revised, sparse) import no entry point (``solve``)
    and no module imports the package itself: the layers options/result/checks -> kernels -> warm -> sparse
    -> solve have no back edge (no registry, no private imports between them)."""
    g = import_graph()
    pkg = "convexsim.lcp.lemke"
    inside = {m: {t for t in ts if t.startswith(pkg + ".") or t == pkg} for m, ts in g.items()
              if m.startswith(pkg + ".")}
    assert all(pkg not in ts for ts in inside.values()), inside
    assert all(f"{pkg}.solve" not in ts for m, ts in inside.items()), inside


PRIVATE_IMPORTS_PENDING: set = set()
"""Imports of another module's private names still waiting for their owner to make them public: none left; the
set only shrinks (a new private import across modules fails the test)."""


def private_imports() -> set[tuple[str, str, str]]:
    """(importing module, imported module, name) for every ``from X import _name`` between two of our modules."""
    modules = _modules()
    out = set()
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                src = _resolve(node.module, modules)
                for a in node.names:
                    if src is not None and src != mod and a.name.startswith("_") and not a.name.startswith("__"):
                        out.add((mod, src, a.name))
    return out


def test_no_module_imports_another_modules_private_names():
    """What modules share is public in its owning module: no ``from convexsim.x import _y`` across modules."""
    found = private_imports()
    assert found <= PRIVATE_IMPORTS_PENDING, sorted(found - PRIVATE_IMPORTS_PENDING)


def test_core_never_imports_the_viewer():
    """Only the CLI (lazily, by design) may import convexsim.viz."""
    g = import_graph()
    bad = {(m, t) for m, ts in g.items() if not m.startswith(("convexsim.viz", "convexsim.cli"))
           for t in ts if t.startswith("convexsim.viz")}
    assert not bad, sorted(bad)


def test_every_package_is_installed():
    """pyproject.toml lists every package directory (a missing one imports from a checkout, not a wheel)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {m for m, f in _modules().items() if f.name == "__init__.py"}
    assert on_disk == listed


def _identifiers(path: Path) -> set[str]:
    """Names a module's code defines or uses (``def x``, ``x``, ``m.x``; not imports alone, strings or
    docstrings)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            out.add(node.name)
        elif isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


def test_only_the_dispatcher_chooses_the_runner():
    """``stepping.dispatch`` is the one place that chooses compiled or reference: no other module refers to an
    eligibility check (``dispatch.ELIGIBILITY``, cached or not), and none refers to both the compiled and the
    reference runner of one (model kind, solver) of ``dispatch.RUNNERS`` (a tool may time one runner)."""
    from convexsim.stepping import dispatch

    def name(spec):
        return spec.partition(":")[2]

    def owner(spec):
        return spec.partition(":")[0]

    checks = {name(s) for s in dispatch.ELIGIBILITY.values()} | {"compiled_step_supported", "lcp_compiled_supported"}
    check_owners = {owner(s) for s in dispatch.ELIGIBILITY.values()} | {"convexsim.stepping.dispatch"}
    pairs = {(k, s): (name(dispatch.RUNNERS[k, s, "compiled"][0]), name(dispatch.RUNNERS[k, s, "reference"][0]))
             for (k, s, p) in dispatch.RUNNERS if p == "compiled"}
    assert pairs, "the runner table lost its compiled runners"
    found = []
    for mod, path in _modules().items():
        if mod == "convexsim.stepping.dispatch":
            continue
        ids = _identifiers(path)
        if mod not in check_owners and ids & checks:
            found.append((mod, "eligibility", sorted(ids & checks)))
        for pair, (compiled, reference) in pairs.items():
            if compiled in ids and reference in ids:
                found.append((mod, "both runners", pair))
    assert not found, found
