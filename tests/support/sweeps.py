"""Sweeps of known truth: synthetic evidence whose every cell's true effect the test sets.

A sample's decode rate is the prompt's own speed x the cell's true effect x the prompt's share
of it x timing noise, in an ABBA order of rounds; the parameters are test_simulation's (taken
from the committed samples). `closed_loop` sends them as kbgen's client does, a stream at a
time, with timed windows: the evidence of a throughput-latency front; `record` makes either a
concluded record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from kbgen.kb.models import Hypothesis, Load, Record
from kbgen.record import figures, verdict
from kbgen.record.evidence import Evidence
from kbgen.run.counters import Counters
from kbgen.run.samples import Sample

EFFECT_SPREAD, SPEED_SPREAD, TIMING_NOISE = 0.15, 0.10, 0.04
TOKENS = 33


def sample(
    variant: str,
    level: int | None,
    prompt: int,
    round_: int,
    at: int,
    cls: str,
    decode_ns: int,
    ttft_ns: int = 20_000_000,
) -> Sample:
    """One request of TOKENS tokens sent at `at` ns: its first token `ttft_ns` later, the rest in
    one chunk `decode_ns` after that."""
    first = at + ttft_ns
    last = first + decode_ns
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
                        decode = int((TOKENS - 1) / rate * 1e9)
                        out.append(sample(v, shown, int(p), r, at, cls, decode))
                        at += 10**9
    return Evidence("base", variants, list(classes), out, loads=loads)


TTFT_MS = 30.0


def closed_loop(
    rng: np.random.Generator,
    tpot_ms: Mapping[str, list[float]],
    loads: list[Load],
    prompts: int = 8,
    rounds: int = 2,
    classes: tuple[str, ...] = ("coding",),
) -> Evidence:
    """A sweep's evidence as kbgen's client sends it: at each load level, `concurrency` streams,
    each sending its next request as its last one ends, every request TOKENS tokens after a
    first token at TTFT_MS x the concurrency. A request's TPOT is its configuration's true TPOT
    (`tpot_ms[variant][level]`, the baseline `base` first) x its prompt's own factor x timing
    noise; every window timed, so that the aggregate throughput is known."""
    variants = list(tpot_ms)
    out: list[Sample] = []
    windows: dict[str, list[Counters]] = {v: [] for v in variants}
    at = 0
    factors = {cls: np.exp(rng.normal(0, SPEED_SPREAD, prompts)) for cls in classes}
    for r in range(rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            for level, load in enumerate(loads):
                shown = level if len(loads) > 1 else None
                start = at
                streams = [at] * load.get("concurrency", 1)
                for cls in classes:
                    for p in rng.permutation(prompts):
                        i = int(np.argmin(streams))
                        tpot = (
                            tpot_ms[v][level]
                            * factors[cls][p]
                            * math.exp(rng.normal(0, TIMING_NOISE))
                        )
                        ttft = int(TTFT_MS * len(streams) * 1e6)
                        decode = int((TOKENS - 1) * tpot * 1e6)
                        made = sample(v, shown, int(p), r, streams[i], cls, decode, ttft)
                        out.append(made)
                        streams[i] = made.chunk_ns[-1]
                at = max(streams)
                tokens = TOKENS * prompts * len(classes)  # the server's count is the client's
                windows[v].append(
                    Counters(
                        round=r,
                        level=shown,
                        window_s=(at - start) / 1e9,
                        generation_tokens=tokens,
                        client_output_tokens=tokens,
                        tokens_match=True,
                    )
                )
                at += 10**9
    concurrency = loads[0].get("concurrency", 1)
    return Evidence(
        "base", variants, list(classes), out, windows, concurrency=concurrency, loads=loads
    )


HYPOTHESIS = Hypothesis(
    statement="n-gram speculation raises the decode rate",
    primary_metric="decode_tok_s",
    direction="increase",
    minimum_effect=0.05,
)


def record(
    evidence: Evidence,
    record_id: str = "a-sweep",
    hypothesis: Hypothesis = HYPOTHESIS,
    samples: bool = False,
) -> Record:
    """A concluded record of a sweep's evidence: its measurements at every load and its verdict,
    computed as `kbgen record` computes them; with `samples`, pointing at its samples file (which
    `kbgen.record.write.write` writes)."""
    judged = verdict.judge(evidence, hypothesis, [])
    return Record.model_validate(
        {
            "schema_version": 1,
            "id": record_id,
            "title": "n-gram draft lengths at two loads",
            "status": "concluded",
            "created": "2026-12-02",
            "concluded": "2026-12-03",
            "hypothesis": hypothesis.model_dump(exclude_unset=True),
            "config": {
                "engine": {"name": "vllm", "version": "0.32.0"},
                "model": {"name": "tiny"},
                "hardware": {"accelerator": "NVIDIA H200", "count": 1},
                "baseline": evidence.baseline,
                "variants": {v: {} for v in evidence.variants},
            },
            "workload": {
                "prompt_suite": "bench/prompts/seed.jsonl",
                "classes": evidence.classes,
                "max_tokens": TOKENS,
                "loads": evidence.loads,
            },
            "measurements": figures.measurements(evidence),
            "by_load": figures.by_load(evidence),
            "verdict": judged.model_dump(exclude_unset=True),
            "provenance": {"source": "measured"},
            **({"raw_samples": {"path": f"{record_id}.samples.jsonl.gz"}} if samples else {}),
        }
    )
