"""convexsim._jit: a kernel declared with explicit signatures compiles on first use (not at import) and then
behaves as numba's eagerly compiled dispatcher: those signatures only, the same argument conversions."""

from __future__ import annotations

import pickle

import numba
import numpy as np
import pytest

from convexsim._jit import LazySignatureDispatcher, jit

SIG = "float64[::1](float64[:, ::1], int64)"


@jit(SIG)
def column(R, j):
    return R[:, j].copy()


@jit(SIG)
def column_called_from_a_kernel(R, j):
    return R[:, j].copy()


eager_column = numba.njit(SIG)(column.py_func)

R = np.arange(9.0).reshape(3, 3)


def test_nothing_is_compiled_before_the_first_use():
    fresh = jit(SIG)(column.py_func)
    assert isinstance(fresh, LazySignatureDispatcher)
    assert fresh.signatures == []


def test_a_call_from_python_compiles_the_declared_signature_only():
    for j in range(3):
        np.testing.assert_array_equal(column(R, j), R[:, j])
    np.testing.assert_array_equal(column(R, np.int32(1)), R[:, 1])
    assert column.signatures == eager_column.signatures
    assert len(column.signatures) == 1


def test_conversions_and_errors_are_the_eager_dispatchers():
    np.testing.assert_array_equal(column(R, 1.0), eager_column(R, 1.0))     # float -> int64, as eager
    for bad in ("a", R):
        with pytest.raises(TypeError):
            eager_column(R, bad)
        with pytest.raises(TypeError):
            column(R, bad)


def test_calls_with_literals_from_a_kernel_share_one_signature():
    @numba.njit          # not cached: typed here, so the callee is compiled for it (literals 0, 1, 2)
    def trace_by_columns(R):
        return (column_called_from_a_kernel(R, 0)[0] + column_called_from_a_kernel(R, 1)[1]
                + column_called_from_a_kernel(R, 2)[2])

    assert column_called_from_a_kernel.signatures == []
    assert trace_by_columns(R) == pytest.approx(np.trace(R))
    assert len(column_called_from_a_kernel.signatures) == 1


def test_pickles_as_itself():
    column(R, 0)
    assert pickle.loads(pickle.dumps(column)) is column


def test_kernel_modules_lists_every_module_that_defines_kernels():
    """kernel_modules() is every module that imports the kernel decorator (derived, never by hand)."""
    from pathlib import Path

    from convexsim._jit import kernel_modules

    root = Path(__file__).resolve().parents[1] / "convexsim"
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if p.name != "_jit.py" and "_jit import" in p.read_text(encoding="utf-8"))
    assert list(kernel_modules()) == users
    assert "geometry/boxes.py" in users and "stepping/sap_composition.py" in users


def test_a_kernels_fingerprint_covers_its_import_closure_only():
    """The stepper's kernels depend on collision's files (an edit there must recompile them); collision's
    kernels do not depend on the stepper's (an edit there must not recompile them)."""
    from pathlib import Path

    from convexsim._jit import import_closure

    root = Path(__file__).resolve().parents[1] / "convexsim"
    stepper = set(import_closure(root / "stepping" / "sap_composition.py"))
    boxes = set(import_closure(root / "geometry" / "boxes.py"))
    assert root / "geometry" / "transforms.py" in stepper and root / "geometry" / "boxes.py" in stepper
    assert root / "geometry" / "transforms.py" in boxes
    assert root / "stepping" / "sap_composition.py" not in boxes
    assert not any("stepping" in f.parts or "lcp" in f.parts for f in boxes)


def test_the_rotation_formula_module_is_in_the_closure_of_the_kernels_that_compile_it():
    """spatial.rotation_entries is plain Python that geometry.transforms compiles into its kernels: its file is
    in the cache fingerprint of every kernel module that reaches transforms (an edit of the formula recompiles
    them), and it imports no numba (numpy callers use it without the JIT)."""
    import ast
    from pathlib import Path

    from convexsim._jit import import_closure

    root = Path(__file__).resolve().parents[1] / "convexsim"
    for rel in ("geometry/transforms.py", "geometry/boxes.py", "stepping/sap_composition.py"):
        assert root / "spatial.py" in import_closure(root / rel), rel
    tree = ast.parse((root / "spatial.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.split(".")[0] == "numba" or m == "convexsim._jit"}


PROBE = '''

@jit
def _cache_probe(a):
    return norm3(a)
'''


def test_editing_a_callee_module_invalidates_the_cached_caller(tmp_path):
    """numba stamps a cached kernel with its own file only; the cached code of ``_cache_probe`` (in
    primitives.py) includes ``norm3`` (in transforms.py). In fresh processes sharing one cache: the first
    run compiles, the second loads from the cache (same answer, no compilation), and after norm3's file
    changes the third must compile again and see the new norm3 (10 instead of 5), not the stale copy."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "convexsim"
    pkg = tmp_path / "src" / "convexsim"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
    prim = pkg / "geometry" / "primitives.py"
    prim.write_text(prim.read_text(encoding="utf-8") + PROBE, encoding="utf-8")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path / "src"),
           "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_DEBUG_CACHE": "1"}
    code = ("import numpy as np; import convexsim; assert convexsim.__file__.startswith(" + repr(str(pkg)) + "); "
            "from convexsim.geometry.primitives import _cache_probe; "
            "print('RESULT', _cache_probe(np.array([3.0, 4.0, 0.0])))")

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                             cwd=tmp_path)         # not the repository: -c puts the cwd first on sys.path
        assert out.returncode == 0, out.stderr
        value = float(out.stdout.split("RESULT")[1].split()[0])
        return value, "data loaded" in out.stdout and "_cache_probe" in out.stdout

    assert run() == (5.0, False)
    assert run() == (5.0, True)
    trans = pkg / "geometry" / "transforms.py"
    old = "return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])"
    text = trans.read_text(encoding="utf-8")
    assert old in text
    trans.write_text(text.replace(old, "return 2.0 * " + old[len("return "):]), encoding="utf-8")
    assert run()[0] == 10.0


# ---- borrowed kernels: compiled without numba's reference counting

@jit(borrowed=True)
def _scaled_sum_into(a, s, out):
    for i in range(a.shape[0]):
        out[i] += s * a[i]


@jit
def _calls_a_borrowed_kernel(n):
    a = np.arange(float(n))
    out = np.ones(n)
    _scaled_sum_into(a[1:], 2.0, out[1:])       # views of arrays the caller owns
    return out


def test_a_borrowed_kernel_reads_and_writes_the_callers_arrays():
    np.testing.assert_array_equal(_calls_a_borrowed_kernel(5), [1.0, 3.0, 5.0, 7.0, 9.0])
    out = np.zeros(3)
    _scaled_sum_into(np.array([1.0, 2.0, 3.0]), -1.0, out)
    np.testing.assert_array_equal(out, [-1.0, -2.0, -3.0])


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="numba's compile-time check")
def test_a_borrowed_kernel_that_allocates_does_not_compile():
    @jit(borrowed=True)
    def returns_new_array(n):
        return np.zeros(n)

    @jit(borrowed=True)
    def allocates_scratch(n):
        return np.zeros(n).sum()

    for kernel in (returns_new_array, allocates_scratch):
        with pytest.raises(numba.core.errors.NumbaError):
            kernel(3)


# ---- the compiled steps' model kinds: a stage's variant chosen by a tuple's length where the caller compiles

@numba.njit
def _only_with_trees(x):
    return 2.0 * x


@numba.njit
def _only_without_trees(x):
    return x + 1.0


@numba.njit(inline="always")
def _stage(model_kind, x):
    if model_kind == 4:               # as sap_composition.rows_stage with NO_TREES
        return _only_without_trees(x)
    return _only_with_trees(x)


@numba.njit
def _entry(arrays, x):
    return _stage(len(arrays), x)


def test_a_stage_inlined_with_the_callers_tuple_length_compiles_one_variant():
    """What ``sap_composition.NO_TREES`` relies on: ``len(arrays)`` of an entry kernel's tuple argument is a
    constant where numba compiles it, and an inlined stage's branch on it is pruned before typing, so the other
    variant's callee is never typed (numba's semantic-constant rewrite and dead-branch pruning; a numba release
    that stops doing so fails here, and the free bodies' step would then compile the tree stages again)."""
    four = (np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1))
    assert _entry(four, 3.0) == 4.0
    assert _only_with_trees.signatures == []
    assert _entry((*four, True), 3.0) == 6.0
    assert len(_only_with_trees.signatures) == 1 and len(_entry.signatures) == 2


def test_the_compiled_steps_model_kind_is_the_length_of_their_arrays():
    """``packing.step_arrays``: the three buffers and the header without trees (``sap_composition.NO_TREES``), a
    fifth item with trees; the LCP kernel's forest tuple likewise (``lcp_composition.NO_TREES``)."""
    from convexsim.simulate import prepare
    from convexsim.stepping import lcp_composition, sap_composition
    from convexsim.stepping.packing import packed_forest, step_arrays

    assert (sap_composition.NO_TREES, lcp_composition.NO_TREES) == (4, 9)
    for scene, trees in (("box_stack", False), ("double_pendulum", True)):
        model, _, _ = prepare(scene, solver="sap")
        assert len(step_arrays(model)) == sap_composition.NO_TREES + trees
        assert (packed_forest(model).fa[15].shape[0] > 0) == trees
