"""make demo's background warm-up: a run waits for the detached process while it works on the run's kernels,
and not for a process id file left behind by a dead process or reused by another program."""

from __future__ import annotations

import subprocess
import sys

import pytest

from convexsim.tools import background_warmup as bw


@pytest.fixture
def pid_path(tmp_path, monkeypatch):
    path = tmp_path / bw.PID_NAME
    monkeypatch.setattr(bw, "pid_file", lambda: path)
    monkeypatch.setattr(bw, "POLL_S", 0.05)
    return path


class _Model:
    has_trees = True


def _started(args: list[str]) -> subprocess.Popen:
    """A child process once it runs ``args`` (its /proc command line is the parent's until it execs)."""
    import time
    from pathlib import Path

    proc = subprocess.Popen([sys.executable, *args])
    for _ in range(200):
        try:
            if b"time.sleep" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                break
        except OSError:
            break
        time.sleep(0.01)
    return proc


def test_a_run_waits_for_the_running_warmup_and_names_its_log(pid_path, monkeypatch, capsys):
    import convexsim.tools.warmup as warmup

    monkeypatch.setattr(warmup, "is_warm", lambda group: False)
    # a stand-in for the warm-up process: its command line names the module, it ends after 1 s
    proc = _started(["-c", "import time; time.sleep(1.5)", "background_warmup"])
    pid_path.write_text(f"{proc.pid}\nout/warmup.log\n", encoding="utf-8")
    assert bw.running_pid() == proc.pid
    waited = bw.wait_for_background_warmup(_Model(), "sap")
    proc.wait()
    err = capsys.readouterr().err
    assert waited is not None and waited > 0.3
    assert f"process {proc.pid}" in err and "its log: out/warmup.log" in err and "waited" in err


def test_no_wait_without_a_live_warmup_or_once_the_kernels_are_there(pid_path, monkeypatch):
    import convexsim.tools.warmup as warmup

    monkeypatch.setattr(warmup, "is_warm", lambda group: False)
    assert bw.wait_for_background_warmup(_Model(), "sap") is None            # no file
    other = _started(["-c", "import time; time.sleep(5)"])                     # a reused id: not ours
    try:
        pid_path.write_text(f"{other.pid}\n", encoding="utf-8")
        assert bw.running_pid() is None
    finally:
        other.kill()
        other.wait()
    pid_path.write_text("999999999\n", encoding="utf-8")                       # no such process
    assert bw.running_pid() is None
    monkeypatch.setattr(warmup, "is_warm", lambda group: True)
    proc = _started(["-c", "import time; time.sleep(5)", "background_warmup"])
    try:
        pid_path.write_text(f"{proc.pid}\n", encoding="utf-8")
        assert bw.wait_for_background_warmup(_Model(), "sap") is None        # its kernels are already there
    finally:
        proc.kill()
        proc.wait()
