"""Every runnable example in README.md and docs/*.md is executed, so that none can rot.

Convention (also stated in docs/performance.md, "Examples are tested"):

* a fenced block tagged ```console holds shell commands, one per line (`# …` comments allowed);
* a fenced block tagged ```python is a complete Python snippet;
* either is skipped when the line just before its opening fence is ``<!-- no-test -->`` (signature
  references, commands that need a browser or a long time); blocks with other tags (```sh, ```yaml,
  untagged) are never run.

The blocks of one file run in order, in one fresh temporary directory (a later block may use a file an
earlier one wrote), with this checkout first on PYTHONPATH. ``convexsim`` is run as ``python -m
convexsim.cli``. Every command must exit 0. To keep the whole runner well under a minute and a half
on a warm kernel cache, commands are shortened without changing what they exercise (``shorten``):
``run`` gets ``--duration 0.05`` unless the example gives a duration, and ``--no-wait`` with ``--view``;
``bench`` runs two small scenes for 5 steps without the solver table; ``study`` runs the spec's
reduced version in this process without plots. A test also checks that the examples cover every
``convexsim`` command, so a new command cannot go undocumented.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
RUNNABLE = ("console", "python")
SKIP_MARK = "<!-- no-test -->"
TIMEOUT_S = 240   # per command; generous for a cold kernel cache (a warm one takes seconds)


def blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line of the opening fence, tag, body) of every runnable block of a Markdown file."""
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    k = 0
    while k < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[k])
        if not m:
            k += 1
            continue
        end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j].strip() for j in range(k - 1, -1, -1) if lines[j].strip()), "")
        if m.group(1) in RUNNABLE and before != SKIP_MARK:
            out.append((k + 1, m.group(1), "\n".join(lines[k + 1:end])))
        k = end + 1
    return out


def commands(body: str) -> list[str]:
    """The commands of a console block: one per line, without comments ('  # ...') and blank lines."""
    out = []
    for line in body.splitlines():
        line = re.split(r"(?:^|\s)#\s", line, maxsplit=1)[0].strip()
        if line:
            out.append(line)
    return out


def shorten(argv: list[str]) -> list[str]:
    """A convexsim command made quick without changing what it exercises (see the module docstring)."""
    if len(argv) < 2 or argv[0] != "convexsim":
        return argv
    verb, rest = argv[1], list(argv[2:])
    if verb == "run":
        if "--duration" not in rest:
            rest += ["--duration", "0.05"]
        if "--view" in rest and "--no-wait" not in rest:
            rest += ["--no-wait", "--quiet"]
    elif verb == "bench":
        rest += ["--duration", "0.005", "--no-solver-bench"] + ([] if "--scenes" in rest else
                                                                 ["--scenes", "sphere_drop", "box_stack"])
    elif verb == "study":
        for flag in ("--jobs", "-j"):
            while flag in rest:
                k = rest.index(flag)
                del rest[k:k + 2]
        rest += ["--reduced", "--jobs", "1", "--no-plots", "--quiet"]
    return argv[:2] + rest


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("DISPLAY", None)          # no browser windows
    return env


def _run(argv: list[str], cwd: Path, where: str) -> None:
    if argv[0] == "convexsim":
        argv = [sys.executable, "-m", "convexsim.cli"] + argv[1:]
    elif argv[0] == "python":
        argv = [sys.executable] + argv[1:]
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (f"{where}: `{shlex.join(argv)}` exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")


def _cases():
    return [pytest.param(p, id=str(p.relative_to(REPO))) for p in DOC_FILES if blocks(p)]


@pytest.mark.parametrize("path", _cases())
def test_examples_of_a_file_run(path: Path, tmp_path: Path):
    """Run every runnable block of ``path`` in order in one temporary directory; each must exit 0."""
    for line, tag, body in blocks(path):
        where = f"{path.relative_to(REPO)}:{line}"
        if tag == "console":
            for cmd in commands(body):
                _run(shorten(shlex.split(cmd)), tmp_path, where)
        else:
            _run(["python", "-c", body], tmp_path, where)


def test_examples_cover_every_command():
    """Every `convexsim` command (but the deprecated alias `seeds`) appears in a runnable console block."""
    from convexsim.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    verbs = set(sub.choices) - {"seeds"}
    shown = {shlex.split(cmd)[1] for p in DOC_FILES for _, tag, body in blocks(p) if tag == "console"
             for cmd in commands(body) if cmd.startswith("convexsim ")}
    assert verbs <= shown, f"commands without a runnable example: {sorted(verbs - shown)}"


def test_block_parser_and_shortening_can_fail(tmp_path: Path):
    """The helpers themselves: a skipped block is not returned, comments are stripped, durations added."""
    probe = tmp_path / "probe.md"
    probe.write_text("x\n<!-- no-test -->\n```console\nconvexsim bench\n```\n```sh\nls\n```\n"
                     "```console\nconvexsim run a  # c\n```\n", encoding="utf-8")
    assert [(tag, commands(body)) for _, tag, body in blocks(probe)] == [("console", ["convexsim run a"])]
    assert shorten(["convexsim", "run", "a"]) == ["convexsim", "run", "a", "--duration", "0.05"]
    given = ["convexsim", "run", "a", "--duration", "1"]
    assert shorten(given) == given
    assert shorten(["convexsim", "study", "s.yaml", "--jobs", "2"]) == [
        "convexsim", "study", "s.yaml", "--reduced", "--jobs", "1", "--no-plots", "--quiet"]
