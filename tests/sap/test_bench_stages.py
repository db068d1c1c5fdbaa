"""`convexsim bench --stages`: the stage profile runs on short windows and prints its table (no timing is
asserted: figures depend on the machine; docs/performance.md holds them)."""

import re

from convexsim.cli import main
from convexsim.tools.bench_stages import stage_profile

STAGES = ("collision", "rows and problem", "symbolic analysis", "Newton (+ impulses)", "integration")


def _shares(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(-?\d+\.\d)%", text)]


def test_stage_table_prints_every_stage_and_shares_of_the_sum(capsys):
    """Check the command prints each stage with a share; the shares are of the sum of the rows that came out
    positive (a row that is a difference of two timed runs may come out negative on this short window), so the
    positive shares add to 100 % up to the rounding of each printed share (0.05 % each)."""
    assert main(["bench", "--stages", "--scenes", "sphere_drop", "--duration", "0.02"]) == 0
    text = capsys.readouterr().out
    for name in STAGES + ("recording (run loop)", "run loop, no recording"):
        assert name in text, name
    shares = _shares(text)
    assert len(shares) == len(STAGES) + 1
    positive = [x for x in shares if x > 0]
    assert positive
    assert abs(sum(positive) - 100.0) <= 0.05 * len(shares) + 1e-9


def test_landing_pile_takes_one_covering_analysis_per_large_island_step():
    """Check the pile's landing window has steps with an island above the dense limit (the two-call step),
    that each of them asks the symbolic cache once (hits + misses = those steps), and that the table has the
    Python-around-the-kernels row instead of the run loop's."""
    p = stage_profile("pile_100", duration=0.15, repeats=1)
    assert p["steps"] == 15
    assert p["two_call_steps"] > 0
    assert p["analyses"] + p["reused"] == p["two_call_steps"]
    assert p["run_loop_ms"] is None
    assert [name for name, _ in p["stages"]] == list(STAGES) + ["Python around the kernels"]


def test_a_model_with_trees_is_refused_with_the_reason(capsys):
    """Check a scene outside the profile's reach (kinematic trees) exits 2 naming the scene and the reason."""
    assert main(["bench", "--stages", "--scenes", "pendulum", "--duration", "0.01"]) == 2
    err = capsys.readouterr().err
    assert "pendulum" in err and "trees" in err
