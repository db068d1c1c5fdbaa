"""Running studies: failures recorded, resume after a kill, torn result lines, Dask = local pool, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from study_testkit import REPO, tiny_study

from convexsim.studies import cli_main, read_csv, run_study
from convexsim.studies import runner as runner_mod
from convexsim.studies.store import TIMING_COLUMNS


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _diverging_study() -> dict:
    """Two LCP runs of a ball dropped from 1 m: an automatic Lemke pivot limit, and a limit of one pivot, which
    no contact LCP of the landing meets (the stepper's fallback rungs find no answer, and the run fails at the
    landing step with its message). A scene file can no longer ask for an overflowing gravity (numbers are
    range-checked), so the failure is a solver's, as a user's study may meet one."""
    return tiny_study(
        name="diverging",
        time_step=0.05, duration=2.0,
        fixed={"bodies.ball.position": [0.0, 0.0, 1.0], "solver.kind": "lcp"},
        parameters=[{"path": "solver.lcp_max_pivots", "values": [0, 1]}],
        metrics=["hop_height", "final_energy", "solver_failures"])


def test_diverging_run_is_recorded_as_failed_and_the_study_goes_on(tmp_path):
    """Check a run whose state overflows is recorded with its error while the other run succeeds."""
    res = run_study(_diverging_study(), jobs=1, out_dir=tmp_path, progress=False, plots=False, report=True)
    rows = read_csv(res.csv)
    assert [r["status"] for r in rows] == ["ok", "failed"]
    assert rows[0]["error"] == ""
    assert rows[1]["error"] != ""  # the simulator's message (non-finite state at some step)
    assert res.failed == 1 and res.executed == 2
    recs = _jsonl(res.jsonl)
    assert recs[1]["status"] == "failed" and recs[1]["error"] == rows[1]["error"]
    assert "Failed runs" in res.report.read_text()


def test_exception_in_a_run_is_recorded(tmp_path, monkeypatch):
    """Check an exception raised by the simulator becomes a failed record with its type and message."""
    calls = []

    def fake_simulate(scene, **kwargs):
        calls.append(kwargs)
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(runner_mod, "_simulate", fake_simulate)
    res = run_study(tiny_study(), jobs=1, out_dir=tmp_path, progress=False, plots=False, report=False)
    assert len(calls) == 4 and res.failed == 4
    assert all(r["error"] == "RuntimeError: solver exploded" for r in read_csv(res.csv))
    # A run that raised is final, like one that stopped early: resuming does not execute it again ...
    again = run_study(tiny_study(), jobs=1, out_dir=tmp_path, progress=False, plots=False, report=False)
    assert len(calls) == 4 and again.executed == 0 and again.skipped == 4 and again.failed == 4
    # ... unless its fingerprint changed (here: the metric options).
    changed = run_study(tiny_study(metric_options={"window": 0.5}), jobs=1, out_dir=tmp_path, progress=False,
                        plots=False, report=False)
    assert len(calls) == 8 and changed.executed == 4


def test_changed_metric_options_reexecute_runs_and_unchanged_resume(tmp_path):
    """Check a stored record is reused only with the same fingerprint (metric options, metrics, version)."""
    spec = tiny_study(duration=0.1, metrics=["rest_penetration", "hop_height"])
    first = run_study(spec, jobs=1, out_dir=tmp_path, progress=False, plots=False, report=False)
    assert first.executed == 4
    same = run_study(spec, jobs=1, out_dir=tmp_path, progress=False, plots=False, report=False)
    assert same.executed == 0 and same.skipped == 4
    # window 0.25 -> 1.0: the rest penetration now averages the whole run, including the drop.
    wide = run_study({**spec, "metric_options": {"window": 1.0}}, jobs=1, out_dir=tmp_path, progress=False,
                     plots=False, report=False)
    assert wide.executed == 4 and wide.skipped == 0
    old = [r["metrics"]["rest_penetration"] for r in first.records]
    new = [r["metrics"]["rest_penetration"] for r in wide.records]
    assert all(a != b for a, b in zip(old, new)), (old, new)
    assert [float(r["rest_penetration"]) for r in read_csv(wide.csv)] == new  # the table shows the new values
    assert all(r["fingerprint"] != q["fingerprint"] for r, q in zip(first.records, wide.records))
    assert len(_jsonl(wide.jsonl)) == 8  # the old records are kept in the file (a later line wins)
    # Another metric list changes the fingerprint too; a record without a fingerprint (older format) is stale.
    more = run_study({**spec, "metric_options": {"window": 1.0}, "metrics": ["rest_penetration"]}, jobs=1,
                     out_dir=tmp_path, progress=False, plots=False, report=False)
    assert more.executed == 4
    lines = _jsonl(more.jsonl)[-4:]
    for rec in lines:
        del rec["fingerprint"]
    more.jsonl.write_text("".join(json.dumps(r) + "\n" for r in lines))
    legacy = run_study({**spec, "metric_options": {"window": 1.0}, "metrics": ["rest_penetration"]}, jobs=1,
                       out_dir=tmp_path, progress=False, plots=False, report=False)
    assert legacy.executed == 4


def test_killed_pool_worker_is_retried_not_recorded_as_a_failure(tmp_path, monkeypatch):
    """Check a worker killed mid-study makes the pool restart and every run still finishes ok."""
    from functools import partial

    import study_testkit

    monkeypatch.setattr(runner_mod, "_pool_initializer", study_testkit.no_warm_up)
    monkeypatch.setattr(runner_mod, "execute_run", partial(study_testkit.exit_worker_once, str(tmp_path / "died")))
    res = run_study(tiny_study(duration=0.05), jobs=2, out_dir=tmp_path / "out", progress=False, plots=False,
                    report=False)
    assert (tmp_path / "died").exists()  # a worker did die
    assert res.failed == 0 and res.retryable == 0 and res.executed == 4
    assert [r["status"] for r in read_csv(res.csv)] == ["ok"] * 4


@pytest.mark.slow
def test_a_run_that_kills_its_worker_does_not_take_the_others_down(tmp_path, monkeypatch):
    """Check that when one run kills its worker every time, the retries (one run at a time on one worker)
    let every other run finish ok and only that run ends 'retryable'. Before, every run in flight when the
    pool broke was lost with it on every attempt."""
    from functools import partial

    import study_testkit

    monkeypatch.setattr(runner_mod, "_pool_initializer", study_testkit.no_warm_up)
    monkeypatch.setattr(runner_mod, "execute_run", partial(study_testkit.exit_worker_on_run, 1))
    res = run_study(tiny_study(duration=0.05), jobs=2, out_dir=tmp_path, progress=False, plots=False,
                    report=False)
    statuses = [r["status"] for r in read_csv(res.csv)]
    assert statuses == ["ok", "retryable", "ok", "ok"], statuses
    assert res.retryable == 1 and res.failed == 0


def test_runs_whose_worker_always_dies_are_retryable_and_rerun_on_resume(tmp_path, monkeypatch):
    """Check runs still without a result after the bounded retries are 'retryable', and resume executes them."""
    import study_testkit

    monkeypatch.setattr(runner_mod, "_pool_initializer", study_testkit.no_warm_up)
    monkeypatch.setattr(runner_mod, "INFRA_RETRIES", 1)
    with monkeypatch.context() as m:
        m.setattr(runner_mod, "execute_run", study_testkit.exit_worker_always)
        res = run_study(tiny_study(duration=0.05), jobs=2, out_dir=tmp_path, progress=False, plots=False,
                        report=False)
    assert res.retryable == 4 and res.failed == 0
    rows = read_csv(res.csv)
    assert [r["status"] for r in rows] == ["retryable"] * 4
    assert all("worker lost 2 times" in r["error"] for r in rows), rows[0]["error"]
    again = run_study(tiny_study(duration=0.05), jobs=1, out_dir=tmp_path, progress=False, plots=False,
                      report=False)
    assert again.executed == 4 and again.skipped == 0 and again.retryable == 0
    assert [r["status"] for r in read_csv(again.csv)] == ["ok"] * 4
    assert len(_jsonl(again.jsonl)) == 8  # the retryable records stay in the file


def test_unreachable_scheduler_exits_2_naming_the_address(tmp_path, capsys):
    """Check --scheduler at a local port where nothing listens fails fast with exit 2 and the address."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(tiny_study(duration=0.05)))
    address = f"tcp://127.0.0.1:{port}"
    assert cli_main([str(spec), "--scheduler", address, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the Dask scheduler at {address}" in err, err
    assert cli_main([str(spec), "--scheduler", "127.0.0.1:8786", "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "expected tcp://HOST:PORT" in capsys.readouterr().err


def test_warm_up_scene_runs_with_every_solver():
    """Check the worker warm-up scene is valid and runs to the end with each contact model and LCP (if it did
    not, warm_up_worker would silently leave the numba loading in the first run's ms_per_step)."""
    import copy

    from convexsim.simulate import simulate

    for kwargs in runner_mod._WARM_RUNS:
        traj = simulate(copy.deepcopy(runner_mod._WARM_SCENE), progress=False, **kwargs)
        assert not traj.failure, (kwargs, traj.failure)
        assert traj.num_frames == 3, kwargs
        assert traj.contact_offsets[-1] > 0, kwargs  # the shapes touch: the contact kernels ran


def test_cli_reports_a_malformed_spec_with_its_field_path(tmp_path, capsys):
    """Check `convexsim study BAD` exits 2 and names the field path."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(tiny_study(parameters=[{"path": "solver.sigma", "range": {"start": 1, "stop": 2,
                                                                                           "count": 1}}])))
    assert cli_main([str(bad), "--quiet"]) == 2
    assert "parameters[0].range.count" in capsys.readouterr().err


def test_cli_runs_a_study_and_strict_flags_failures(tmp_path, capsys):
    """Check the CLI prints where the results are, and --strict exits 1 when a run failed."""
    spec = tmp_path / "div.yaml"
    spec.write_text(yaml.safe_dump(_diverging_study()))
    out = tmp_path / "out"
    assert cli_main([str(spec), "--jobs", "1", "--out", str(out), "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "2 runs (2 executed, 0 resumed, 1 failed)" in text and str(out / "results.csv") in text
    # Resumed: nothing to execute, the failure is still reported.
    assert cli_main([str(spec), "--out", str(out), "--no-plots", "--strict", "--quiet"]) == 1


def test_torn_last_line_is_dropped_and_only_missing_runs_execute(tmp_path):
    """Check a truncated final JSONL line is repaired and only unrecorded runs are executed."""
    spec = tiny_study(duration=0.05)
    first = run_study(spec, jobs=1, out_dir=tmp_path, progress=False, plots=False, report=False)
    lines = first.jsonl.read_text().splitlines()
    assert len(lines) == 4
    # Keep two complete records, then half of the third (a write cut by a kill).
    first.jsonl.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2])
    again = run_study(spec, jobs=1, out_dir=tmp_path, progress=False, plots=False, report=False)
    assert again.executed == 2 and again.skipped == 2
    recs = _jsonl(again.jsonl)  # every line parses
    assert len(recs) == 4 and len({r["run_id"] for r in recs}) == 4
    assert recs[0] == json.loads(lines[0]) and recs[1] == json.loads(lines[1])  # old results untouched
    assert len(read_csv(again.csv)) == 4


def test_killed_study_resumes_without_redoing_finished_runs(tmp_path):
    """Kill a study (SIGKILL) after its first result, rerun it: nothing redone, files valid."""
    spec_path = tmp_path / "resume.yaml"
    # Four runs of 150 steps: long enough that the kill lands while later runs are pending.
    spec_path.write_text(yaml.safe_dump(tiny_study(
        name="resume", time_step=2e-3, duration=0.3,
        parameters=[{"path": "materials.default.stiffness", "values": [1e3, 2e3, 4e3, 8e3]}])))
    out = tmp_path / "out"
    jsonl = out / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "convexsim.studies", str(spec_path), "--jobs", "1", "--out",
                             str(out), "--quiet", "--no-plots"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if jsonl.is_file() and jsonl.read_bytes().count(b"\n") >= 1:
                break
            if proc.poll() is not None:
                pytest.fail(f"study exited early: {proc.stderr.read().decode()}")
            time.sleep(0.02)
        else:
            pytest.fail("no result line within 240 s")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    text = jsonl.read_text()
    # the kill may land in the middle of a record: the complete lines are what was recorded (resuming drops
    # a torn last line, test_torn_last_line_is_dropped_and_only_missing_runs_execute)
    before = [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]
    n_done = len(before)
    assert 1 <= n_done < 4, f"kill landed after {n_done} runs; the test needs pending runs"
    if (out / "results.csv").exists():  # the CSV is whole (atomic), possibly one run behind the JSONL
        assert len(read_csv(out / "results.csv")) <= n_done
    res = run_study(spec_path, jobs=1, out_dir=out, progress=False, plots=False, report=False)
    assert res.skipped == n_done and res.executed == 4 - n_done
    after = _jsonl(res.jsonl)
    assert len(after) == 4 and len({r["run_id"] for r in after}) == 4
    assert after[:n_done] == before  # finished records kept as they were (same worker pid, same time)
    assert {r["worker"] for r in before} != {r["worker"] for r in after[n_done:]}
    rows = read_csv(res.csv)
    assert [int(r["index"]) for r in rows] == [0, 1, 2, 3] and all(r["status"] == "ok" for r in rows)


def _physics_rows(csv_path: Path) -> list[dict]:
    rows = read_csv(csv_path)
    drop = set(TIMING_COLUMNS)
    return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows), key=lambda r: int(r["index"]))


@pytest.mark.slow
def test_dask_cluster_gives_the_same_table_as_the_local_pool(tmp_path):
    """Check a study run through --scheduler on a Dask LocalCluster matches the local process pool."""
    distributed = pytest.importorskip("dask.distributed")
    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(tiny_study(duration=0.1)))
    local = run_study(spec, jobs=2, out_dir=tmp_path / "local", progress=False, plots=False, report=False)
    # Two worker processes (as on a real cluster: runs are pickled to other interpreters), all on 127.0.0.1.
    with distributed.LocalCluster(host="127.0.0.1", n_workers=2, threads_per_worker=1, processes=True,
                                  protocol="tcp", dashboard_address=None,
                                  worker_dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        code = cli_main([str(spec), "--scheduler", cluster.scheduler_address, "--out", str(tmp_path / "dask"),
                         "--no-plots", "--quiet"])
    assert code == 0
    a, b = _physics_rows(local.csv), _physics_rows(tmp_path / "dask" / "results.csv")
    assert len(a) == 4
    assert all(r["status"] == "ok" for r in a)
    # Same code, same inputs, deterministic solver: the tables agree exactly (not just to a tolerance),
    # whatever order the runs finished in (rows are sorted by index).
    assert a == b
    for csv_path in (local.csv, tmp_path / "dask" / "results.csv"):
        workers = {r["worker"] for r in read_csv(csv_path)}
        assert str(os.getpid()) not in {w.split(":")[-1] for w in workers}  # ran in other processes
