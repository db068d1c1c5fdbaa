"""The warm-up's plan (convexsim.tools.warmup): which jobs a group needs, in which order they may run, and
when a run compiles its own kernels first. The compilation itself is exercised by `make test`'s warm-up and
its `--check`; these tests replace the jobs by recorders and never compile."""

import pytest

from convexsim.tools import warmup


def test_every_job_is_planned_after_what_it_needs():
    assert set(warmup._ORDER) == set(warmup._JOBS)
    position = {name: i for i, name in enumerate(warmup._ORDER)}
    for name, needs in warmup.NEEDS.items():
        assert name in warmup._JOBS
        for need in needs:
            assert position[need] < position[name], (need, name)


def test_a_group_brings_the_shared_kernels_it_calls():
    assert warmup._jobs_for(["sap-bodies"]) == ["convex", "broadphase", "newton", "boxes", "collision",
                                                "step-parts", "sap-bodies"]     # no tree kernel for free bodies
    assert "forest" in warmup._jobs_for(["sap-trees"]) and "sap-bodies" not in warmup._jobs_for(["sap-trees"])
    assert warmup._jobs_for(["sap-large"])[-2:] == ["step-finish", "sap-large"]   # the two-call step's halves
    assert warmup._jobs_for(["sap-large-trees"])[-2:] == ["sap-trees", "sap-large-trees"]
    assert warmup._jobs_for(["sap-reference"]) == ["sap-reference"]
    assert set(warmup._jobs_for(list(warmup.GROUPS))) == set(warmup._JOBS)


def test_jobs_run_in_process_in_plan_order_and_groups_are_marked(monkeypatch):
    ran, marked = [], []
    monkeypatch.setattr(warmup, "_JOBS", {name: (lambda steps, n=name: ran.append(n)) for name in warmup._JOBS})
    monkeypatch.setattr(warmup, "_mark_warm", marked.append)
    monkeypatch.setattr(warmup, "write_bytecode", lambda: True)
    warmup.warm_up(groups=["sap-trees"], jobs=1, progress=False)
    assert ran == ["convex", "broadphase", "newton", "boxes", "forest", "collision", "step-parts",
                   "sap-trees"]     # the tree variant of the SAP step; the free bodies' one is not compiled
    assert marked == ["sap-trees"]


def test_unknown_group_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown warm-up group.*'sap'"):
        warmup.warm_up(groups=["sap"], jobs=1, progress=False)


def test_marker_depends_on_the_target_cpu(monkeypatch, tmp_path):
    import numba

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    here = warmup._marker("sap-bodies")
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert warmup._marker("sap-bodies") != here         # a cache for another CPU is not this one
    assert warmup._marker("sap-bodies").parent == tmp_path


def test_a_run_compiles_its_group_only_when_not_yet_warm(monkeypatch, capsys):
    from convexsim.simulate import prepare

    model, _, _ = prepare(warmup.WARMUP_TREE_SCENE, solver="lcp")
    assert warmup.run_group(model, "lcp") == "lcp-trees"
    calls = []
    monkeypatch.setattr(warmup, "warm_up", lambda **kw: calls.append(kw["groups"]) or 12.5)
    monkeypatch.setattr(warmup, "is_warm", lambda group: True)
    assert warmup.ensure_warm(model, "lcp") is None and calls == []
    monkeypatch.setattr(warmup, "is_warm", lambda group: False)
    assert warmup.ensure_warm(model, "lcp") == 12.5 and calls == [["lcp-trees"]]
    err = capsys.readouterr().err
    assert "first run" in err and "compiled in 12.5 s" in err


def test_only_models_with_islands_above_the_dense_limit_warm_the_large_step(monkeypatch):
    """``run_groups``: the supernodal two-call step is warmed for a model whose moving dofs exceed
    ``packing.ISLAND_MAX_DOFS`` (an island can be that large), never for a smaller one or for the LCP."""
    from convexsim.simulate import prepare
    from convexsim.stepping import packing

    small, _, _ = prepare("box_stack", solver="sap")
    pile, _, _ = prepare("pile_100", solver="sap")
    assert warmup.run_groups(small, "sap") == ["sap-bodies"]
    assert warmup.run_groups(pile, "sap") == ["sap-bodies", "sap-large"]
    assert warmup.run_groups(pile, "lcp") == ["lcp-bodies"]
    monkeypatch.setattr(packing, "ISLAND_MAX_DOFS", 0)
    assert warmup.run_groups(small, "sap") == ["sap-bodies", "sap-large"]
    robot, _, _ = prepare(warmup.WARMUP_TREE_SCENE, solver="sap")
    assert warmup.run_groups(robot, "sap") == ["sap-trees", "sap-large-trees"]   # the step's tree variant


def test_a_filler_takes_only_a_worker_the_plan_leaves_idle():
    """``_ready``: a filler job (a later path's leaf) is offered only when no planned job is ready; the demo's
    plan then compiles the trees' leaf while one worker compiles the free-body step."""
    plan = warmup._jobs_for(["sap-bodies"]) + ["forest"]
    fillers = warmup.FILLERS["sap-bodies"]
    assert fillers == ("forest",) and "forest" not in warmup._jobs_for(["sap-bodies"])
    assert "forest" not in warmup._ready(list(plan), set(), plan, fillers)              # leaves are ready first
    leaves = {"convex", "broadphase", "newton", "boxes", "step-parts"}
    assert warmup._ready(["collision", "sap-bodies", "forest"], leaves, plan, fillers) == ["collision"]
    assert warmup._ready(["sap-bodies", "forest"], leaves, plan, fillers) == ["forest"]  # collision running
    assert warmup._ready(["sap-bodies", "forest"], leaves | {"collision"}, plan, fillers)[0] == "sap-bodies"


def test_fillers_are_skipped_in_one_process_and_passed_by_a_first_run(monkeypatch):
    ran = []
    monkeypatch.setattr(warmup, "_JOBS", {name: (lambda steps, n=name: ran.append(n)) for name in warmup._JOBS})
    monkeypatch.setattr(warmup, "_mark_warm", lambda group: None)
    monkeypatch.setattr(warmup, "write_bytecode", lambda: True)
    warmup.warm_up(groups=["sap-bodies"], jobs=1, progress=False, fillers=("forest",))
    assert "forest" not in ran and ran[-1] == "sap-bodies"      # one process: nothing is idle to fill
    from convexsim.simulate import prepare

    model, _, _ = prepare("box_stack", solver="sap")
    calls = []
    monkeypatch.setattr(warmup, "warm_up", lambda **kw: calls.append(kw) or 1.0)
    monkeypatch.setattr(warmup, "is_warm", lambda group: False)
    warmup.ensure_warm(model, "sap")
    assert calls[0]["groups"] == ["sap-bodies"] and calls[0]["fillers"] == ("forest",)
