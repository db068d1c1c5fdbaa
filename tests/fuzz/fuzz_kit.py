"""Shared pieces of the bad-input fuzz tests (issue 29): the in-process CLI call with its property, the
value pool numbers and types are broken with, and dict/list path walking for mutations."""

from __future__ import annotations

import contextlib
import io
import math
from collections import Counter
from typing import Any

from hypothesis import event
from hypothesis import strategies as st

from convexsim.cli import main
from convexsim.io import load_trajectory

ALLOWED_STATUS = (0, 1, 2)
"""Statuses any command may end with on any input: ok, a failed run or check, a refusal of the input."""
MISMATCH_STATUS = 3
"""``identify`` only: the best fit is a model mismatch (docs/identify.md)."""
INTERNAL_STATUS = 70
"""An internal error (a bug): never allowed."""

TALLY: Counter = Counter()
"""Statuses of the CLI calls of the running test (reset and reported per test by ``tests/fuzz/conftest.py``)."""

# Values a field is replaced with: every JSON/YAML type, extreme and non-finite numbers, wrong shapes.
NASTY_VALUES = [
    math.nan, math.inf, -math.inf, 0, 0.0, -0.0, -1, -1.0, 1e300, -1e300, 1e-300, -1e-300, 5e-324, 1e16, 1e-16,
    10**30, -(10**30), 2**63, True, False, None, "", "abc", "1e3", "nan", [], {}, [1, 2], [0.0, 0.0, 0.0, 0.0, 0.0],
    [[1, 2, 3], [4, 5, 6]], {"x": 1}, [math.nan, 0, 0], [1e300, 1e300, 1e300], [[[[[[]]]]]], "sphere", "world",
]

nasty_values = st.sampled_from(NASTY_VALUES)


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``convexsim.cli.main(argv)`` in this process: (status, stdout, stderr). SystemExit is turned into its
    status; any other exception propagates (and fails the test): that is the traceback the user would see."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(a) for a in argv])
        except SystemExit as exc:     # main() returns a status; a SystemExit escaping it is still not a crash
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue(), err.getvalue()


def check_cli(argv: list[str]) -> tuple[int, str, str]:
    """``cli(argv)`` and the property every command has on any input: status 0, 1 or 2 (and 3 when
    ``identify`` runs), never an internal error (70), no traceback, and a message on stderr when the status
    is 2 (a refusal, not an internal error's report)."""
    status, out, err = cli(argv)
    TALLY[status] += 1
    command = next((str(a) for a in argv if not str(a).startswith("-")), "")
    allowed = ALLOWED_STATUS + ((MISMATCH_STATUS,) if command == "identify" else ())
    assert status != INTERNAL_STATUS, (argv, "internal error", err[-2000:])
    assert status in allowed, (argv, status, err[-2000:])
    assert "internal error" not in err, (argv, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, (argv, err[-2000:])
    if status == 2:        # a message (`convexsim` alone prints its help on stdout)
        assert err.strip() or (not argv and out.strip()), (argv, "status 2 without a message")
    return status, out, err


def error_lines(err: str) -> list[str]:
    """stderr without warnings and notes: the error message lines."""
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("warning:", "note:"))]


def paths(doc: Any, loc: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) into a nested dict/list document, the root included."""
    out = [loc]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, loc + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, loc + (i,))
    return out


def get(doc: Any, loc: tuple) -> Any:
    for k in loc:
        doc = doc[k]
    return doc


def check_robot_file(path, tmp, import_argvs: list[list], time_step: float, run: bool) -> None:
    """The importer fuzzers' property on one robot file ``path`` (URDF or MJCF): each ``import_argvs`` command
    ends 0 or 2 (and a scene it wrote with ``--out tmp/out.yaml`` validates); ``validate path`` ends 0 or 2, 2
    with every error line naming the file; with ``run``, a file that validates runs two steps of
    ``time_step`` [s] with status 0 or 1, and 0 wrote a loadable three-frame trajectory."""
    out_yaml = tmp / "out.yaml"
    for argv in import_argvs:
        status, _, err = check_cli(argv)
        assert status in (0, 2), err
        if status == 0 and out_yaml in argv:      # what the importer wrote loads as it is
            status, _, err = check_cli(["validate", out_yaml])
            assert status == 0, err
    status, _, err = check_cli(["validate", path])
    assert status in (0, 2), err
    event("valid" if status == 0 else "refused")
    if status == 2:
        assert all(str(path) in ln or ln.startswith("  - ") for ln in error_lines(err)), err
    elif run:
        out = tmp / "run.npz"
        out.unlink(missing_ok=True)
        rs, _, err = check_cli(["run", path, "--duration", str(2 * time_step), "--time-step", str(time_step),
                                "--quiet", "--out", out])
        assert rs in (0, 1), err
        if rs == 0:
            assert load_trajectory(out).num_frames == 3
