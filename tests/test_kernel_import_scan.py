"""The import scan behind the kernels' cache fingerprints (convexsim._jit._direct_imports) reads the sources
with regular expressions, for start-up time. It must never miss an import: a missed file would let numba
run a stale cached kernel after that file changed. Checked against Python's own parser on every module of
the package (the scan may find more, from text that only looks like an import; never less)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from convexsim import _jit

ROOT = _jit._package_root()
MODULES = sorted(ROOT.rglob("*.py"))


def _imports_by_parser(path: Path) -> set[Path]:
    """What the scan must find, from the syntax tree: every ``import`` and absolute ``from … import``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if _jit._module_file(f"{node.module}.{a.name}") else node.module
                     for a in node.names]
        else:
            continue
        found.update(f for f in map(_jit._module_file, names) if f is not None and f != path)
    return found


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_the_scan_finds_every_import_the_parser_finds(path):
    missed = _imports_by_parser(path) - set(_jit._direct_imports(path))
    assert not missed, sorted(str(m.relative_to(ROOT)) for m in missed)


def test_the_scan_reads_multiline_and_aliased_imports(tmp_path, monkeypatch):
    """Parenthesized names over several lines, comments inside them, backslash continuations, ``as`` aliases,
    function-local imports: the forms the package's sources use."""
    source = tmp_path / "probe.py"
    source.write_text(
        "import numpy as np\n"
        "from convexsim.sap import (\n    newton,  # the solver\n    constraints as c,\n)\n"
        "def f():\n    import convexsim.spatial as sp\n"
        "from convexsim.geometry import \\\n    boxes\n", encoding="utf-8")
    found = {p.relative_to(ROOT).as_posix() for p in _jit._direct_imports(source)}
    assert {"sap/newton.py", "sap/constraints.py", "spatial.py", "geometry/boxes.py"} <= found
