"""The machine as a blocking factor: prompts pair within a machine, the effect pools over
prompt × machine, and machines that disagree are a caveat, inconclusive where it changes the
outcome (known truth: each machine's speed per arm is the test's)."""

from __future__ import annotations

import math
import random

from kbgen.kb.models import Outcome
from kbgen.record import stats, verdict
from kbgen.record.evidence import Evidence
from kbgen.run.samples import UNIT_STRIDE, Sample, block_of, paired_by
from kbgen.run.spec import MAX_REQUESTS
from tests.record.test_verdict import CLASSES, CLEAN, FASTER
from tests.support.runs import make_sample


def machines(gains: list[float], prompts: int = 12, speed: list[float] | None = None) -> Evidence:
    """Both arms on each machine, 2 rounds; machine m's variant `gains[m]` faster than its own
    baseline, and machine m `speed[m]` times as fast as the first in both arms."""
    rng = random.Random(11)
    own = {(c, p): rng.uniform(10, 16) for c in CLASSES for p in range(prompts)}
    samples: list[Sample] = []
    for block, gain in enumerate(gains):
        pace = 1.0 if speed is None else speed[block]
        for r in range(2):
            for arm in ("baseline", "ngram") if r == 0 else ("ngram", "baseline"):
                for (cls, p), base in own.items():
                    rate = base * pace * (1 + gain if arm == "ngram" else 1)
                    s = make_sample(arm, cls, p, 0, rate, rng)
                    s.round, s.block = r, block
                    samples.append(s)
    return Evidence(
        "baseline", ["baseline", "ngram"], CLASSES, samples, {"baseline": [CLEAN], "ngram": [CLEAN]}
    )


def test_units_are_prompt_by_machine_and_one_machine_keeps_its_prompt_numbers() -> None:
    s = make_sample("ngram", "coding", 7, 0, 10.0, random.Random(1))
    assert paired_by(s) == 7 and block_of(paired_by(s)) is None
    s.block = 2
    assert paired_by(s) != 7 and block_of(paired_by(s)) == 2
    # no class holds as many prompts as the stride: a machine's units never reach the next's
    assert MAX_REQUESTS < UNIT_STRIDE


def test_machines_that_agree_pool_their_prompts_with_no_caveat() -> None:
    decided = verdict.judge(machines([0.3, 0.3, 0.3]), FASTER, [], temperature=0)
    assert decided.outcome == Outcome.SUPPORTED, decided.caveats
    coding = decided.per_class["coding"]
    assert coding.prompts == 36  # 12 prompts on each of 3 machines
    assert not any("machines disagree" in c for c in decided.caveats)


def test_a_machine_slower_overall_is_no_disagreement_pairing_within_it() -> None:
    # the third machine is half as fast in both arms: pairing within it cancels that
    decided = verdict.judge(machines([0.3, 0.3, 0.3], speed=[1, 1, 0.5]), FASTER, [], 0)
    assert decided.outcome == Outcome.SUPPORTED, decided.caveats
    assert not any("machines disagree" in c for c in decided.caveats)


def test_a_machine_slower_in_one_arm_is_a_caveat() -> None:
    # every machine supports a gain, one much less: they disagree, the outcome stands
    decided = verdict.judge(machines([0.5, 0.5, 0.15]), FASTER, [], temperature=0)
    assert decided.outcome == Outcome.SUPPORTED, decided.caveats
    said = [c for c in decided.caveats if "machines disagree" in c]
    assert said and "machine 2 +15" in said[0]


def test_a_machine_that_decides_otherwise_makes_it_inconclusive() -> None:
    # two machines gain 50%, the third loses 20% in its variant arm
    decided = verdict.judge(machines([0.5, 0.5, -0.2]), FASTER, [], temperature=0)
    assert decided.outcome == Outcome.INCONCLUSIVE
    coding = decided.per_class["coding"]
    assert coding.reason is not None and "machine 2 alone refuted" in coding.reason
    assert coding.prompts_needed is None  # more prompts would not make the machines agree


def test_the_anova_p_value_is_scipys() -> None:
    from scipy import stats as scipy_stats

    groups = [[0.1, 0.2, 0.15], [0.3, 0.35, 0.4]]
    assert stats.machines_differ(groups) == float(scipy_stats.f_oneway(*groups).pvalue)
    # by hand: between-group squares 0.06 on 1 df, within 0.01 on 4: F = 24
    assert math.isclose(stats.machines_differ(groups), scipy_stats.f.sf(24, 1, 4), rel_tol=1e-9)
    assert stats.machines_differ([[0.1], [0.2, 0.3]]) == 1.0
