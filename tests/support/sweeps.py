"""Sweeps of known truth: synthetic evidence whose every cell's true effect the test sets.

A sample's decode rate is the prompt's own speed x the cell's true effect x the prompt's share
of it x timing noise, in an ABBA order of rounds; the parameters are test_simulation's (taken
from the committed samples).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from kbgen.bench.samples import Sample
from kbgen.kb.models import Load
from kbgen.record.evidence import Evidence

EFFECT_SPREAD, SPEED_SPREAD, TIMING_NOISE = 0.15, 0.10, 0.04
TOKENS = 33


def sample(
    variant: str, level: int | None, prompt: int, round_: int, rate: float, at: int, cls: str
) -> Sample:
    """One request of TOKENS tokens decoding at `rate` tokens/s, sent at `at` ns."""
    first = at + 20_000_000
    last = first + int((TOKENS - 1) / rate * 1e9)
    return Sample(
        variant=variant,
        prompt_class=cls,
        prompt_index=prompt,
        repeat=0,
        round=round_,
        level=level,
        scheduled_ns=at,
        sent_ns=at,
        chunk_ns=[first, last],
        chunk_tokens=[1, TOKENS - 1],
        done_ns=last,
        output_tokens=TOKENS,
    )


def evidence(
    rng: np.random.Generator,
    truth: Mapping[str, list[float]],
    loads: list[Load],
    prompts: int = 8,
    rounds: int = 2,
    classes: tuple[str, ...] = ("coding",),
) -> Evidence:
    """A sweep's evidence: `truth[variant][level]`, each variant's true relative effect at each
    load level against the baseline (`base`, whose own entry is ignored)."""
    variants = ["base", *truth]
    out: list[Sample] = []
    at = 0
    for cls in classes:
        speed = math.log(14) + rng.normal(0, SPEED_SPREAD, prompts)
        gains = {
            v: [math.log1p(t) + rng.normal(0, EFFECT_SPREAD, prompts) for t in truth[v]]
            for v in truth
        }
        for r in range(rounds):
            for v in variants if r % 2 == 0 else variants[::-1]:
                for level in range(len(loads)):
                    for p in rng.permutation(prompts):
                        gain = 0.0 if v == "base" else gains[v][level][p]
                        rate = math.exp(speed[p] + gain + rng.normal(0, TIMING_NOISE))
                        shown = level if len(loads) > 1 else None
                        out.append(sample(v, shown, int(p), r, rate, at, cls))
                        at += 10**9
    return Evidence("base", variants, list(classes), out, loads=loads)
