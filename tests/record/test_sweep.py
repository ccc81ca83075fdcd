"""A sweep's verdict: every variant judged at every load, the family controlled, the best named.

The evidence is synthetic with a known truth per cell (tests/support/sweeps.py); the bench
path with a paced stand-in server is tests/bench/test_sweep_bench.py.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from kbgen.kb.models import Constraint, Hypothesis, Load, Outcome, Record
from kbgen.record import evidence as evidence_module
from kbgen.record import rule, verdict
from kbgen.record.rule import CONFIDENCE
from tests.support import sweeps

HYPOTHESIS = Hypothesis(
    statement="faster",
    primary_metric="decode_tok_s",
    direction="increase",
    minimum_effect=0.05,
)
LOADS: list[Load] = [{"concurrency": 1}, {"concurrency": 8}]


def test_every_variant_is_judged_at_every_load_and_the_best_is_found() -> None:
    """The issue's case: k5 slower (0.9x), k3 much faster (1.5x) at one stream; at eight k3
    hurts (0.7x) and k5 is neutral. The record judges both, not only the first variant."""
    truth = {"k5": [-0.10, 0.0], "k3": [0.50, -0.30]}
    found = verdict.judge(
        sweeps.evidence(np.random.default_rng(1), truth, LOADS, prompts=12), HYPOTHESIS, []
    )
    cells = {(c.variant, c.load["concurrency"]): c for c in found.cells}
    assert len(found.cells) == 4
    assert cells[("k3", 1)].outcome == Outcome.SUPPORTED
    assert cells[("k5", 1)].outcome == Outcome.REFUTED
    assert cells[("k3", 8)].outcome == Outcome.REFUTED
    assert found.variant == "k3" and found.load == {"concurrency": 1}
    assert found.outcome == Outcome.SUPPORTED
    assert found.family is not None and found.family.comparisons == 4
    assert found.family.cell_confidence == pytest.approx(1 - (1 - CONFIDENCE) / 4)
    best = {b.load["concurrency"]: b for b in found.best}
    assert best[1].variant == "k3" and best[1].probability_best > 0.95
    assert best[8].variant in ("base", "k5") and "k3" not in best[8].ties


def test_the_intervals_shown_are_the_family_s() -> None:
    """Each cell's interval is the simultaneous one it was decided by: wider than the A/B's
    95% interval of the same comparison, and the headline's per_class shows the same."""
    rng = np.random.default_rng(5)
    truth = {"k3": [0.2, 0.2], "k5": [0.1, 0.1]}
    sweep_evidence = sweeps.evidence(rng, truth, LOADS)
    found = verdict.judge(sweep_evidence, HYPOTHESIS, [])
    alone = verdict.compare(
        evidence_module.at_level(sweep_evidence, 0), found.variant, HYPOTHESIS, None
    )
    cell = next(c for c in found.cells if c.variant == found.variant and c.load == LOADS[0])
    a_b = alone.per_class["coding"]
    assert cell.ci_low is not None and cell.ci_high is not None
    assert a_b.ci_low is not None and a_b.ci_high is not None
    assert cell.ci_low < a_b.ci_low and cell.ci_high > a_b.ci_high
    assert found.per_class["coding"].ci_low == cell.ci_low
    assert "Bonferroni" in found.rule and "4 comparisons in the record" in found.rule


def test_an_a_b_is_unchanged_one_cell_per_class() -> None:
    """One variant at one load: no family, no cells, the 95% intervals as before."""
    rng = np.random.default_rng(2)
    found = verdict.judge(sweeps.evidence(rng, {"k3": [0.3]}, [{}]), HYPOTHESIS, [])
    assert found.family is None and found.cells == [] and found.best == []
    assert found.confidence == CONFIDENCE and "Sweep" not in found.rule


def test_a_cell_without_data_is_inconclusive_and_says_why() -> None:
    rng = np.random.default_rng(3)
    data = sweeps.evidence(rng, {"k3": [0.3, 0.3], "k5": [0.3, 0.3]}, LOADS)
    data.samples = [s for s in data.samples if not (s.variant == "k5" and s.level == 1)]
    found = verdict.judge(data, HYPOTHESIS, [])
    gone = next(c for c in found.cells if c.variant == "k5" and c.load == LOADS[1])
    assert gone.outcome == Outcome.INCONCLUSIVE and gone.effect is None
    assert gone.reason and "k5" in gone.reason


def test_a_sweep_s_verdict_validates_in_a_record_and_names_cells_by_class() -> None:
    rng = np.random.default_rng(4)
    found = verdict.judge(sweeps.evidence(rng, {"k3": [0.3, 0.0]}, LOADS), HYPOTHESIS, [])
    dumped = found.model_dump(mode="json", exclude_unset=True)
    assert dumped["cells"][0]["class"] == "coding"
    assert set(dumped["cells"][0]) >= {"variant", "load", "class", "outcome", "effect"}
    assert set(dumped["best"][0]) >= {"load", "variant", "probability_best", "ties"}
    record = {
        "schema_version": 1,
        "id": "a-sweep",
        "title": "t",
        "status": "planned",
        "created": "2026-12-02",
        "config": {
            "engine": {"name": "vllm"},
            "model": {"name": "m"},
            "hardware": {},
            "baseline": "base",
            "variants": {"base": {}},
        },
        "verdict": dumped,
    }
    with pytest.raises(ValueError, match="'k3' is not a variant"):
        Record.model_validate(record)
    record["config"]["variants"]["k3"] = {}  # type: ignore[index]
    assert Record.model_validate(record).verdict == found


SWEEPS = 400


@pytest.mark.slow  # over 10 s: not in the fast lane
def test_at_the_minimum_effect_a_sweep_rarely_decides_any_cell() -> None:
    """The family-wise rate: every setting's true effect exactly at the minimum effect, where
    any decisive cell is wrong; at most 5% of 400 sweeps (3 settings x 2 loads, 8 prompts)
    decide any. Bonferroni's bound is nearly tight here (the cells share only the baseline's
    timing noise), so the rate sits near 4%: seeds 0-3 gave 14, 20, 13 and 14 of 400. The same
    sweeps decided cell by cell at 95%, with no family control, decide far more often.
    """
    rng = np.random.default_rng(2026)
    null = HYPOTHESIS.minimum_effect
    truth = {v: [null, null] for v in ("k1", "k3", "k5")}
    started = time.perf_counter()
    decisive = 0
    uncontrolled = 0
    for _ in range(SWEEPS):
        data = sweeps.evidence(rng, truth, LOADS)
        found = verdict.judge(data, HYPOTHESIS, [], resamples=999)
        decisive += any(c.outcome != Outcome.INCONCLUSIVE for c in found.cells)
        uncontrolled += any(
            c.outcome != Outcome.INCONCLUSIVE
            for level in range(len(LOADS))
            for v in truth
            for c in verdict.compare(
                evidence_module.at_level(data, level), v, HYPOTHESIS, None
            ).per_class.values()
        )
    print(
        f"{decisive}/{SWEEPS} sweeps decided a cell (uncontrolled: {uncontrolled}); "
        f"{time.perf_counter() - started:.1f} s"
    )
    assert decisive / SWEEPS <= 0.05
    assert uncontrolled / SWEEPS > 0.15  # the control is what keeps it down


def test_a_step_whose_arms_were_sent_different_loads_decides_no_cell() -> None:
    """An imported sweep's `sweep_step` level (GuideLLM's sweep gives each arm its own rates):
    its cells are held inconclusive whatever their intervals, and it names no best."""
    loads: list[Load] = [{"concurrency": 1}, {"sweep_step": 1}]
    found = verdict.judge(
        sweeps.evidence(np.random.default_rng(1), {"k3": [0.5, 0.5]}, loads, prompts=12),
        HYPOTHESIS,
        [],
    )
    cells = {c.load.get("sweep_step"): c for c in found.cells}
    assert cells[None].outcome == Outcome.SUPPORTED
    assert cells[1].outcome == Outcome.INCONCLUSIVE and cells[1].effect is not None
    assert cells[1].reason == f"k3: {rule.UNEQUAL_LOADS}"
    assert [b.load for b in found.best] == [loads[0]]
    assert "`sweep_step`" in found.rule


def test_a_configuration_breaking_a_constraint_is_not_the_best() -> None:
    """k3 is fastest at one stream but its first token takes 620 ms: under `ttft_ms p99 <= 500`
    it is excluded, and the best is the next."""
    truth = {"k3": [0.50, 0.0], "k5": [0.20, 0.0]}
    data = sweeps.evidence(np.random.default_rng(6), truth, LOADS, prompts=12)
    late = 600_000_000  # ns
    data.samples = [
        s.model_copy(
            update={"chunk_ns": [t + late for t in s.chunk_ns], "done_ns": s.done_ns + late}
        )
        if s.variant == "k3" and s.done_ns is not None
        else s
        for s in data.samples
    ]
    bounded = HYPOTHESIS.model_copy(
        update={"constraints": [Constraint(metric="ttft_ms", statistic="p99", at_most=500)]}
    )
    free = {b.load["concurrency"]: b for b in verdict.judge(data, HYPOTHESIS, []).best}
    found = verdict.judge(data, bounded, [])
    best = {b.load["concurrency"]: b for b in found.best}
    assert free[1].variant == "k3"
    assert best[1].variant == "k5" and best[1].excluded == ["k3"]
    assert "k3" not in best[1].ties and best[8].excluded == ["k3"]
    assert "ttft_ms p99 at most 500 ms" in found.rule


def test_a_best_over_the_classes_average_says_where_it_is_not_the_best() -> None:
    """The issue's case: a setting best on average (+80% in coding, -30% in chat) named with
    probability near 1 though the chat class refuted it: each class's own best is stated, and
    the verdict says where the average's best is not a class's."""
    rng = np.random.default_rng(4)
    load: list[Load] = [{"concurrency": 1}]
    coding = sweeps.evidence(rng, {"k3": [0.8], "k5": [0.0]}, load, 12, classes=("coding",))
    chat = sweeps.evidence(rng, {"k3": [-0.3], "k5": [0.0]}, load, 12, classes=("chat",))
    both = dataclasses.replace(coding, classes=["coding", "chat"])
    both.samples = [*coding.samples, *chat.samples]
    found = verdict.judge(both, HYPOTHESIS, [])
    [best] = found.best
    assert best.variant == "k3" and best.per_class is not None
    assert best.per_class["coding"] == "k3" and best.per_class["chat"] != "k3"
    chat_cell = next(c for c in found.cells if (c.variant, c.prompt_class) == ("k3", "chat"))
    assert chat_cell.outcome == Outcome.REFUTED
    assert any(
        c.startswith("best k3 at concurrency 1 over the classes' average, not in chat")
        for c in found.caveats
    )
