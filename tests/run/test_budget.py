"""A stopping run's time budget, on the run.json of real runs: the EAGLE-3 sweep on the H200 (its
round 2 cut short by `max_minutes` before its baseline), the deciding spec's first try there,
and its two complete runs on an H100: how long the rest of a round will take."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kbgen.run import budget, design, spec
from kbgen.run.models import RunMeta
from tests.conftest import REPO

RUN = Path(__file__).parents[1] / "fixtures" / "run-folders" / "h200-eagle3-sweep.run.json"
SAME, CHANGED = 1.488, 3.702  # between two windows: on one server; beyond a start, on another


def meta() -> RunMeta:
    return RunMeta.model_validate_json(RUN.read_text())


def round_2() -> list[design.Step]:
    return [step for step in design.steps(meta().order) if step[0] == 1]


def test_what_passes_between_two_windows_is_measured_from_the_run() -> None:
    # on one server 0.6-2.5 s (warm-up, scrapes); a start took 1.5-5.3 s more than its start-up
    starts = {"eagle3-k2": 148.45, "eagle3-k3": 98.31, "eagle3-k5": 86.77}
    starts |= {"ngram": 87.52, "eagle3-k1": 72.21, "baseline": 117.39}
    gaps = budget._gaps(meta(), starts)
    assert gaps.same == pytest.approx(SAME, abs=1e-3)
    assert gaps.changed == pytest.approx(CHANGED, abs=1e-2)


def test_the_rest_of_a_round_takes_its_arms_starts_windows_and_what_passes_between() -> None:
    # the sweep's round 2, in its order: eagle3-k1 (serving already: it ended round 1), n-gram,
    # eagle3-k5, -k3, -k2, the baseline, each at 32, 8, then 1 stream; each arm's windows over
    # its rounds (s) and its mean start, as run.json has them
    windows = {"eagle3-k1": 21.28, "ngram": 23.65, "eagle3-k5": 38.44}
    windows |= {"eagle3-k3": 31.93, "eagle3-k2": 31.67, "baseline": 12.59}
    starts = {"ngram": 87.52, "eagle3-k5": 86.77, "eagle3-k3": 98.31}
    starts |= {"eagle3-k2": 148.45, "baseline": 117.39}
    assert [arm for _, arm, _ in round_2()[::3]] == list(windows)
    expected = sum(windows.values()) + sum(starts.values()) + 5 * CHANGED + 13 * SAME
    assert budget.seconds(meta(), round_2(), "eagle3-k1") == pytest.approx(expected, abs=0.1)
    assert expected / 60 == pytest.approx(12.3, abs=0.05)  # it began with a minute left
    # nothing serving: eagle3-k1 starts too
    alone = budget.seconds(meta(), round_2(), None) - budget.seconds(meta(), round_2(), "eagle3-k1")
    assert alone == pytest.approx(72.21 + CHANGED - SAME, abs=0.01)


def test_the_run_s_own_round_1_is_predicted_within_3_percent() -> None:
    # from its first window's start to its last window's end, as the run measured them, against
    # what its own figures predict for those 18 windows (the baseline's server up already)
    run = meta()
    first = [w for arm in run.variants.values() for w in arm.windows if w.round == 0]
    took = (max(w.end_ns for w in first) - min(w.start_ns for w in first)) / 1e9
    round_1 = [step for step in design.steps(run.order) if step[0] == 0]
    predicted = budget.seconds(run, round_1, "baseline") - SAME  # no gap before the first
    assert took == pytest.approx(706.3, abs=0.1)
    assert predicted == pytest.approx(took, rel=0.03)  # 689.2 s: the n-gram arm's mean start


def test_the_deciding_spec_s_two_rounds_are_predicted_from_the_sweep() -> None:
    # bench/experiments/gpu/eagle3-k1-h200-pinned.yaml (its comments and bench/gpu/README.md say
    # 5.9 and 3.9 minutes): its eagle3 arm is the sweep's eagle3-k1
    decider = spec.load(REPO / "bench" / "experiments" / "gpu" / "eagle3-k1-h200-pinned.yaml")
    planned = design.steps(design.windows(decider))
    named = [(r, "eagle3-k1" if arm == "eagle3" else arm, level) for r, arm, level in planned]
    round_1 = [step for step in named if step[0] == 0]
    round_2 = [step for step in named if step[0] == 1]
    assert budget.seconds(meta(), round_1, None) / 60 == pytest.approx(5.9, abs=0.05)
    assert budget.seconds(meta(), round_2, round_1[-1][1]) / 60 == pytest.approx(3.9, abs=0.05)
    assert decider.workload.rounds == 2 and decider.workload.max_minutes == 16


def test_an_arm_not_measured_yet_takes_the_mean_start_and_window_of_all() -> None:
    # 7 starts (mean 99.74 s), 22 windows (mean 8.26 s)
    got = budget.seconds(meta(), [(1, "other", 0)], None)
    assert got == pytest.approx(99.74 + CHANGED + 8.26, abs=0.01)
    assert budget.seconds(meta(), [], "eagle3-k1") == 0.0


def test_an_arm_measured_without_a_timed_start_starts_nothing() -> None:
    # an external server, or one reused from an arm of the same command line: no start-up
    run = meta()
    run.variants["eagle3-k1"].startup_s = []
    starts = {
        arm: sum(v.startup_s) / len(v.startup_s) for arm, v in run.variants.items() if v.startup_s
    }
    changed = budget._gaps(run, starts).changed  # its 73.7 s after n-gram now all overhead
    got = budget.seconds(run, [(1, "eagle3-k1", 0)], "baseline")
    assert got == pytest.approx(changed + 16.57, abs=0.01) and got < 72.21


def test_a_run_of_one_load_keeps_its_windows_under_level_none() -> None:
    run = meta()
    for arm in run.variants.values():
        for window in arm.windows:
            window.level = None  # as a run of one load writes them
    got = budget.seconds(run, [(1, "baseline", 0)], "baseline")
    assert got == pytest.approx(SAME + (10.33 + 1.70 + 0.56) / 3, abs=0.01)


def test_a_budget_is_spent_when_what_is_left_of_it_cannot_hold_what_is_to_come() -> None:
    began = time.monotonic() - 60  # a minute ago
    assert not budget.spent(None, began, 1e9)  # no limit
    assert not budget.spent(2, began)
    assert not budget.spent(2, began, 50)
    assert budget.spent(2, began, 70)
    assert budget.spent(1, began)


def test_on_a_fresh_machine_its_first_start_made_round_2_too_long_for_14_minutes() -> None:
    # the deciding spec's run on a fresh H200 (records/2026-12-04-eagle3-k1-h200-pinned): round
    # 2 predicted from round 1, whose eagle3 start (190.1 s) was the machine's first, with cold
    # caches (a warm one took 98.3 s); the run stopped 8.07 minutes after its folder was made
    run = RunMeta.model_validate_json((RUN.parent / "h200-eagle3-k1.run.json").read_text())
    assert run.stopped is not None and run.stopped.reason == "minutes"
    assert run.variants["eagle3"].startup_s == pytest.approx([190.12], abs=0.01)
    round_2 = [step for step in design.steps(run.order) if step[0] == 1]
    assert [arm for _, arm, _ in round_2[::3]] == ["baseline", "ngram", "eagle3"]
    more = budget.seconds(run, round_2, "baseline")
    assert more / 60 == pytest.approx(6.30, abs=0.01)
    began = time.monotonic() - 8.07 * 60
    assert budget.spent(14, began, more)  # as the run found: 14.37 minutes
    assert not budget.spent(16, began, more)  # the spec's budget since
    # at eagle3's warm start, round 2 would have fit 14 minutes
    warm = more - (190.12 - 98.3)
    assert not budget.spent(14, began, warm)


def _round_2_predicted_and_measured(name: str) -> tuple[float, float]:
    """Round 2 of a complete run, in seconds: as the budget predicts it from round 1's own
    starts and windows (what the driver knew when it began round 2, the arm that ended round 1
    still serving), and as it ran (from round 1's last window's end to round 2's)."""
    run = RunMeta.model_validate_json((RUN.parent / name).read_text())
    ends = {
        r: max(w.end_ns for a in run.variants.values() for w in a.windows if w.round == r)
        for r in (0, 1)
    }
    for arm in run.variants.values():  # what round 1 had measured: a start and its windows
        arm.windows = [w for w in arm.windows if w.round == 0]
        arm.startup_s = arm.startup_s[:1]
    steps = design.steps(run.order)
    serving = [arm for r, arm, _ in steps if r == 0][-1]
    round_2 = [step for step in steps if step[0] == 1]
    return budget.seconds(run, round_2, serving), (ends[1] - ends[0]) / 1e9


def test_a_complete_run_s_round_2_is_predicted_from_its_round_1() -> None:
    # the deciding spec on an H100 (records/2026-12-06-eagle3-k1-h100-pinned, and -2 run again
    # at once): on the machine that had just trained the draft, round 1's starts (95, 65, 63 s)
    # compiled cold and were slower than round 2's (57, 55 s), so the budget over-predicted, the
    # safe way; run again, warm (45-49 s each), it came 3.0% short (the sweep's round 1: 2.4%)
    predicted, took = _round_2_predicted_and_measured("h100-eagle3-k1.run.json")
    assert (predicted, took) == pytest.approx((211.4, 168.3), abs=0.1)
    assert predicted > took
    again, took_again = _round_2_predicted_and_measured("h100-eagle3-k1-again.run.json")
    assert (again, took_again) == pytest.approx((144.9, 149.4), abs=0.1)
