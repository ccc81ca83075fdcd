"""A stopping run's time budget, on the run.json of the real EAGLE-3 sweep on the H200 (round 2
cut short by `max_minutes` before its baseline): how long the rest of a round will take."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kbgen.bench import budget
from kbgen.bench.run_models import RunMeta

RUN = Path(__file__).parents[1] / "fixtures" / "run-folders" / "h200-eagle3-sweep.run.json"
# round 2 of that sweep as its order had it, the settings that left the race left out
ROUND_2 = [(1, arm, level) for arm in ("eagle3-k1", "ngram", "baseline") for level in (2, 1, 0)]


def meta() -> RunMeta:
    return RunMeta.model_validate_json(RUN.read_text())


def test_the_rest_of_a_round_takes_its_arms_starts_and_their_windows_at_each_load() -> None:
    # eagle3-k1 serves already (it ended round 1); its windows: 1.36, 3.42 and 16.55 s on
    # average over its two rounds. n-gram starts (87.5 s, the mean of its two starts) and its
    # windows took 0.90, 3.82 and 18.85 s; the baseline starts (117.4 s) and took 0.62, 1.68
    # and 10.34 s
    assert budget.seconds(meta(), ROUND_2, "eagle3-k1") == pytest.approx(262.43, abs=0.01)
    # nothing serving: eagle3-k1 starts too (72.2 s)
    assert budget.seconds(meta(), ROUND_2, None) == pytest.approx(262.43 + 72.21, abs=0.01)


def test_an_arm_not_measured_yet_takes_the_mean_start_and_window_of_all() -> None:
    # 7 starts (mean 99.7 s), 22 windows (mean 8.27 s)
    assert budget.seconds(meta(), [(1, "other", 0)], None) == pytest.approx(108.0, abs=0.01)
    assert budget.seconds(meta(), [], "eagle3-k1") == 0.0


def test_a_budget_is_spent_when_what_is_left_of_it_cannot_hold_what_is_to_come() -> None:
    began = time.monotonic() - 60  # a minute ago
    assert not budget.spent(None, began, 1e9)  # no limit
    assert not budget.spent(2, began)
    assert not budget.spent(2, began, 50)
    assert budget.spent(2, began, 70)
    assert budget.spent(1, began)
