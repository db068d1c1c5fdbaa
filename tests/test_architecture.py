"""Module layering of convexsim: no import cycles, solver packages stay pure math, the core never
imports the viewer. Import edges are read from the source (every ``import`` statement, at any depth,
including function-local, relative and TYPE_CHECKING imports), and so are the imports made through
strings: a ``"package.module:function"`` entry of a table (``stepping.dispatch.RUNNERS``, ``ELIGIBILITY``)
is an edge to that module, and a name a package resolves lazily (its ``_LAZY`` table, name -> submodule)
is an edge from the importer to the submodule. So a cycle hidden behind a local import or a string counts.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
import pytest

from repo_paths import REPO as ROOT
PACKAGE_DIRS = {"convexsim": ROOT / "convexsim", "convexsim.viz": ROOT / "viz", "convexsim.scenes": ROOT / "scenes"}
IMPORT_STRING = re.compile(r"^(convexsim(?:\.\w+)+):\w+$")
"""A "module:function" string naming one of our functions, imported by ``importlib`` when used."""


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


def _trees(modules: dict[str, Path]) -> dict[str, ast.AST]:
    return {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in modules.items()}


def lazy_tables(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """package -> {public name: the module that defines it} of every package with a ``_LAZY`` table (read
    from the imported package: the tables are built in several ways; values are submodule names or full
    module names)."""
    import importlib

    out = {}
    for mod, path in modules.items():
        if path.name == "__init__.py" and "_LAZY" in path.read_text(encoding="utf-8"):
            table = getattr(importlib.import_module(mod), "_LAZY")
            out[mod] = {name: sub if sub.startswith("convexsim.") else f"{mod}.{sub}" for name, sub in table.items()}
    return out


def import_statements(mod: str, path: Path, tree: ast.AST):
    """(node, absolute module, imported names or None for ``import x``) of every import statement, relative
    imports made absolute."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node, a.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg_parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg_parts = pkg_parts[:len(pkg_parts) - (node.level - 1)]
                base = ".".join(pkg_parts + ([base] if base else []))
            yield node, base, [a.name for a in node.names]


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, frozenset[str]]:
    """Edges module -> imported module (ours only), statements, lazy names and import strings included (read
    once per session)."""
    modules = _modules()
    trees = _trees(modules)
    lazy = lazy_tables(modules)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        targets: list[str] = []
        for _, base, names in import_statements(mod, path, trees[mod]):
            if names is None:
                targets.append(base)
                continue
            for name in names:
                targets.append(lazy.get(base, {}).get(name, f"{base}.{name}"))
        for node in ast.walk(trees[mod]):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = IMPORT_STRING.match(node.value)
                if m:
                    targets.append(m.group(1))
        for t in targets:
            r = _resolve(t, modules)
            if r is not None and r != mod:
                graph[mod].add(r)
    return {m: frozenset(ts) for m, ts in graph.items()}


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


def test_graph_reader_follows_strings_lazy_names_and_relative_imports():
    """The dispatcher's runner strings are edges to the runners' modules; ``from convexsim.stepping import
    StepContext`` (a lazy name) is an edge to ``stepping.context``; viz's ``from . import draw`` is an edge."""
    from convexsim.stepping import dispatch

    g = import_graph()
    for spec, _ in dispatch.RUNNERS.values():
        assert spec.partition(":")[0] in g["convexsim.stepping.dispatch"], spec
    lazy = lazy_tables(_modules())
    assert lazy["convexsim.stepping"]["StepContext"] == "convexsim.stepping.context"
    users = [m for m, path in _modules().items() if "from convexsim.stepping import StepContext" in path.read_text()]
    assert users and all("convexsim.stepping.context" in g[m] for m in users)
    assert "convexsim.viz.draw" in g["convexsim.viz.playback"]


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


CYCLE_EDGES_PENDING: set = set()
"""Edges closing a known cycle, waiting for their owner to remove them; the set only shrinks (empty: the LCP
step's public entry ``stepping.lcp_step`` lives beside ``stepping.step``, no longer in the reference module
that ``dispatch.RUNNERS`` names)."""


def test_no_import_cycles():
    g = import_graph()
    assert all(t in g[m] for m, t in CYCLE_EDGES_PENDING), "a pending cycle edge is gone: remove it from the set"
    assert _cycles({m: ts - {t for mm, t in CYCLE_EDGES_PENDING if mm == m} for m, ts in g.items()}) == []


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


LEMKE_LAYERS = (("options", "result", "checks", "validate", "workspace"), ("pivot_rules",), ("tableau",), ("revised",),
                ("sparse_kernels",), ("warm",), ("sparse",), ("solve",))
"""The layers of ``convexsim.lcp.lemke``, lowest first: options, results and checks; the pivot rules every
pivot loop shares (ratio tests, tie-breaks, entry rows); the dense pivot kernels
(tableau, then revised, which uses its pivots); the sparse kernels; the warm start; the sparse driver; the
entry point ``solve``. A module imports only modules of lower layers."""


def test_the_lemke_package_is_layered():
    """Inside ``convexsim.lcp.lemke`` every import goes down the layers of LEMKE_LAYERS (no back edge, none
    within a layer), no module imports the package itself, and every module has its layer."""
    g = import_graph()
    pkg = "convexsim.lcp.lemke"
    rank = {f"{pkg}.{m}": k for k, layer in enumerate(LEMKE_LAYERS) for m in layer}
    inside = {m: {t for t in ts if t.startswith(pkg + ".") or t == pkg} for m, ts in g.items()
              if m.startswith(pkg + ".")}
    assert set(inside) == set(rank), ("modules without a layer", sorted(set(inside) - set(rank)))
    assert all(pkg not in ts for ts in inside.values()), inside
    back = sorted((m, t) for m, ts in inside.items() for t in ts if rank[t] >= rank[m])
    assert not back, back


PRIVATE_IMPORTS_PENDING: set = set()
"""Imports of another module's private names still waiting for their owner to make them public: none left; the
set only shrinks (a new private import across modules fails the test)."""


def private_imports() -> set[tuple[str, str, str]]:
    """(importing module, imported module, name) for every ``from X import _name`` between two of our modules."""
    modules = _modules()
    trees = _trees(modules)
    out = set()
    for mod, path in modules.items():
        for node, base, names in import_statements(mod, path, trees[mod]):
            src = _resolve(base, modules)
            for name in names or ():
                if src is not None and src != mod and name.startswith("_") and not name.startswith("__"):
                    out.add((mod, src, name))
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
    try:
        import tomllib
    except ModuleNotFoundError:          # Python 3.10: the test extra installs tomli, the same parser
        import tomli as tomllib

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
