#!/usr/bin/env python3
"""How often kbgen's verdicts decide at the boundary, simulated under noise of every kind.

Usage: python bench/perf/decisions.py [--runs 1000] [--sweep-runs N] [--noises A,B] [--quick]
       [--json FILE]

Every design kbgen allows (fixed and stopping, 1 to 6 rounds, 4 to 16 prompts, 1 to 5 classes,
an A/B and a sweep of 5 settings x 3 loads x 3 classes) is run `--runs` times on a simulated
server whose true effect sits exactly at the minimum effect (+5%), under each noise: per-prompt
effects normal or Student-t(3), 1% of requests 5x slower, a server whose speed drifts linearly by
4% or 10% over the run. The requests go in the driver's own order (`run.design.windows` and
`round_requests` of a real spec) and a stopping design looks where the driver does: at the end
of every round from the second on (`run.design.Design.looks`). Every cell is decided by
`record.class_verdict.decide` at the level the verdict gives it (a sweep's Bonferroni level).

Printed per design and noise: the share of runs with any decisive cell (supported or refuted:
both wrong at the boundary) with its 95% Clopper-Pearson interval, the coverage of the first
cell's interval at the true effect, and the requests used against the fixed design's. Then the
saving: a stopping design of 48 prompts at 3x the minimum effect, the median share of the fixed
design's requests it used. `--quick` runs 400 runs of the designs the suite asserts.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import class_verdict
from kbgen.record.rule import CONFIDENCE
from kbgen.run import design as interleaved
from kbgen.run.design import Design as Stopping
from kbgen.run.spec import ExperimentSpec

MINIMUM = 0.05
EFFECT_SPREAD, SPEED_SPREAD, TIMING_NOISE, JITTER = 0.15, 0.10, 0.04, 0.01  # test_simulation's
OUTLIER_SLOWDOWN = 5.0
FAMILIES = 4  # templates a class, in the `families` noise: prompt p written from p % 4

Cells = dict[int, dict[int, list[list[float]]]]


@dataclass(frozen=True)
class Design:
    """What a spec can ask for: its prompts a class, rounds, classes, settings beside the
    baseline and loads, fixed or stopping, and whether it accepts one round."""

    name: str
    prompts: int = 16
    rounds: int = 2
    stop: bool = False
    classes: int = 1
    settings: int = 1
    loads: int = 1
    accept: bool = False
    groups: int = 0  # the suite names each prompt's group (prompt p in group p % groups)

    def spec(self) -> ExperimentSpec:
        """A real spec of this design, for the driver's order of windows and requests."""
        variants: dict[str, Any] = {"baseline": {}}
        variants |= {f"s{i}": {"args": ["--k", str(i)]} for i in range(self.settings)}
        sweep = (
            {"workload.concurrency": [2**i for i in range(self.loads)]} if self.loads > 1 else {}
        )
        return ExperimentSpec.model_validate(
            {
                "schema_version": 1,
                "id": "simulated",
                "title": "simulated",
                "hypothesis": hypothesis(self).model_dump(exclude_none=True),
                "server": {"launcher": "external", "url": "http://127.0.0.1:1"},
                "baseline": "baseline",
                "variants": variants,
                "workload": {
                    "prompts": "simulated.jsonl",
                    "classes": [f"c{i}" for i in range(self.classes)],
                    "repeats": 2,
                    "rounds": self.rounds,
                    "order_seed": 7,
                    **({"stop": "when-decided"} if self.stop else {}),
                    "accept_time_confound": self.accept,
                },
                **({"sweep": sweep} if sweep else {}),
            }
        )


@dataclass(frozen=True)
class Noise:
    """The server and the prompts: per-prompt effects (`normal`, `t3`, `skewed`, `families`),
    the share of requests 5x slower, a linear drift of the server's speed over the run (log)."""

    name: str
    effects: str = "normal"
    outliers: float = 0.0
    drift: float = 0.0


def hypothesis(design: Design) -> Hypothesis:
    return Hypothesis(
        statement="faster",
        primary_metric="decode_tok_s",
        direction="increase",
        minimum_effect=MINIMUM,
        min_prompts=min(8, design.groups or design.prompts),
    )


@dataclass
class Result:
    """One design under one noise, over its runs."""

    design: str
    noise: str
    runs: int
    decisive: int = 0
    covered: int = 0
    intervals: int = 0
    used: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        low, high = clopper_pearson(self.decisive, self.runs)
        return {
            "design": self.design,
            "noise": self.noise,
            "runs": self.runs,
            "decisive": self.decisive / self.runs,
            "decisive_low": low,
            "decisive_high": high,
            "coverage": self.covered / self.intervals if self.intervals else None,
            "requests_used": statistics.fmean(self.used),
        }


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy import stats

    low = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return low, high


Request = tuple[int, int, str, int, str, int, float]  # window, round, arm, level, class, prompt, t


def schedule(spec: ExperimentSpec, prompts: int) -> list[Request]:
    """Every request of the spec, `prompts` a class, in the order the driver sends it, with its
    time: window w's requests spread over [w, w + 1)."""
    suite = {c: [""] * prompts for c in spec.workload.classes}
    out = []
    for w, (round_, arm, level) in enumerate(interleaved.steps(interleaved.windows(spec))):
        keys = interleaved.round_requests(spec.workload, suite, round_)
        for place, key in enumerate(keys):
            t = w + place / len(keys)
            out.append((w, round_, arm, level, key.prompt_class, key.prompt_index, t))
    return out


def simulate(
    design: Design, noise: Noise, log_effect: float, rng: np.random.Generator, sent: list[Request]
) -> list[float]:
    """Each request's value (tokens/s, higher better) under `noise`, the true effect of every
    setting `log_effect` in every class and at every load."""
    windows = 1 + max(r[0] for r in sent)
    classes, prompts = design.classes, design.prompts
    speed = np.log(14) + rng.normal(0, SPEED_SPREAD, (classes, prompts))
    shape = (design.settings, design.loads, classes, prompts)
    if noise.effects == "t3":
        spread = rng.standard_t(3, shape) * EFFECT_SPREAD / math.sqrt(3)
    elif noise.effects == "skewed":  # a few prompts gain much, most a little: mean 0, SD 0.15
        spread = (rng.exponential(1.0, shape) - 1.0) * EFFECT_SPREAD
    elif noise.effects == "families":  # 4 templates a class: a prompt shares its template's
        template = rng.normal(0, EFFECT_SPREAD, (*shape[:3], FAMILIES))
        spread = template[..., np.arange(prompts) % FAMILIES] + rng.normal(0, 0.03, shape)
    else:
        spread = rng.normal(0, EFFECT_SPREAD, shape)
    gain = log_effect + spread
    jitter = rng.normal(0, JITTER, windows)
    sign = rng.choice([-1.0, 1.0])
    n = len(sent)
    timing = rng.normal(0, TIMING_NOISE, n)
    slow = rng.random(n) < noise.outliers
    values = []
    for i, (w, _round, arm, level, cls, p, t) in enumerate(sent):
        c = int(cls[1:])
        rate = speed[c, p] + jitter[w] + sign * noise.drift * t / windows + timing[i]
        if arm != "baseline":
            rate += gain[int(arm[1:]), level, c, p]
        value = math.exp(rate) / (OUTLIER_SLOWDOWN if slow[i] else 1.0)
        values.append(value)
    return values


def cells_of(
    sent: list[Request], values: list[float], upto: int
) -> dict[tuple[str, int, str], Cells]:
    """(arm, level, class) -> prompt -> round -> requests' values, rounds up to `upto`."""
    out: dict[tuple[str, int, str], Cells] = {}
    for (_w, round_, arm, level, cls, p, _t), value in zip(sent, values, strict=True):
        if round_ <= upto:
            out.setdefault((arm, level, cls), {}).setdefault(p, {}).setdefault(round_, []).append(
                [value]
            )
    return out


def one_run(
    design: Design,
    noise: Noise,
    log_effect: float,
    rng: np.random.Generator,
    sent: list[Request],
    spec: ExperimentSpec,
) -> tuple[bool, list[tuple[float, float]], float]:
    """A run: whether any cell was decisive, the cells' intervals and the share of
    the fixed design's requests it sent."""
    values = simulate(design, noise, log_effect, rng, sent)
    h = hypothesis(design)
    comparisons = design.settings * design.loads * design.classes  # the record's family
    confidence = 1 - (1 - CONFIDENCE) / comparisons
    stopping = Stopping(design.rounds) if design.stop else None
    looks = stopping.looks() if stopping else [design.rounds - 1]
    cells_keys = [
        (f"s{s}", level, c)
        for s in range(design.settings)
        for level in range(design.loads)
        for c in spec.workload.classes
    ]
    for look in looks:
        cells = cells_of(sent, values, look)
        found = [
            class_verdict.decide(
                cells[("baseline", level, c)],
                cells[(arm, level, c)],
                h,
                confidence=confidence,
                design=stopping,
                time_confound_ok=design.accept,
                groups={p: f"g{p % design.groups}" for p in range(design.prompts)}
                if design.groups
                else None,
            )[0]
            for arm, level, c in cells_keys
        ]
        decided = [v.outcome in (Outcome.SUPPORTED, Outcome.REFUTED) for v in found]
        if all(decided) or look == looks[-1]:
            used = sum(1 for r in sent if r[1] <= look) / len(sent)
            intervals = [  # relative changes: a bound of -100% (exp underflowed) is one
                (v.ci_low, v.ci_high)
                for v in found
                if v.ci_low is not None and v.ci_high is not None
            ]
            return any(decided), intervals, used
    raise AssertionError("unreachable: the last look returns")


def run(design: Design, noise: Noise, runs: int, log_effect: float, seed: int) -> Result:
    spec = design.spec()
    sent = schedule(spec, design.prompts)
    rng = np.random.default_rng(seed)
    result = Result(design.name, noise.name, runs)
    for _ in range(runs):
        decisive, intervals, used = one_run(design, noise, log_effect, rng, sent, spec)
        result.decisive += decisive
        result.used.append(used)
        if intervals:
            low, high = intervals[0]
            result.intervals += 1
            result.covered += low <= math.expm1(log_effect) <= high
    return result


NOISES = [
    Noise("normal"),
    Noise("t3", effects="t3"),
    Noise("skewed", effects="skewed"),
    Noise("families (4 templates)", effects="families"),
    Noise("outliers 1%", outliers=0.01),
    Noise("drift 4%", drift=0.04),
    Noise("drift 10%", drift=0.10),
    Noise("t3 + outliers + drift 10%", effects="t3", outliers=0.01, drift=0.10),
]
DESIGNS = [
    Design("fixed, 2 rounds"),
    Design("fixed, 3 rounds", rounds=3),
    Design("fixed, 4 rounds", rounds=4),
    Design("fixed, 2 rounds, 8 prompts", prompts=8),
    Design("fixed, 2 rounds, 4 prompts (min_prompts 4)", prompts=4),
    Design("fixed, 1 round", rounds=1),
    Design("stopping, 2 rounds", stop=True),
    Design("stopping, 4 rounds", rounds=4, stop=True),
    Design("stopping, 6 rounds", rounds=6, stop=True),
    Design("stopping, 1 round", rounds=1, stop=True),
    Design("fixed, 2 rounds, 16 prompts in 4 groups", groups=4),
    Design("fixed, 2 rounds, 5 classes", classes=5),
    Design("sweep 5 x 3 x 3, fixed, 8 prompts", prompts=8, settings=5, loads=3, classes=3),
    Design("sweep 5 x 3 x 3, fixed, 16 prompts", settings=5, loads=3, classes=3),
    Design(
        "sweep 5 x 3 x 3, stopping 4 rounds, 8 prompts",
        prompts=8,
        settings=5,
        loads=3,
        classes=3,
        rounds=4,
        stop=True,
    ),
]
# Shown, not asserted: a one-round verdict the spec accepted, confound stated
ACCEPTED = [Design("fixed, 1 round, accept_time_confound", rounds=1, accept=True)]
QUICK_DESIGNS = [
    d for d in DESIGNS if "sweep" not in d.name and "classes" not in d.name and not d.groups
]
QUICK_NOISES = [n for n in NOISES if n.name in ("normal", "drift 10%", "t3 + outliers + drift 10%")]


def cases(quick: bool) -> Iterator[tuple[Design, Noise]]:
    designs = QUICK_DESIGNS if quick else DESIGNS + ACCEPTED
    for noise in QUICK_NOISES if quick else NOISES:
        for design in designs:
            yield design, noise
    if quick:  # prompts in families: judged by their groups, and (the error) by their prompts
        families = next(n for n in NOISES if n.effects == "families")
        yield next(d for d in DESIGNS if d.groups), families
        yield DESIGNS[0], families


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sweep-runs", type=int, help="runs of a sweep design (default: --runs)")
    parser.add_argument("--noises", help="only these noises, by name, comma-separated")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    a = parser.parse_args()
    runs = 400 if a.quick else a.runs
    began = time.perf_counter()
    rows = []
    print(f"{'design':48} {'noise':28} {'decisive':>22} {'coverage':>8} {'requests':>8} runs")
    only = set(a.noises.split(",")) if a.noises else None
    for i, (design, noise) in enumerate(cases(a.quick)):
        if only is not None and noise.name not in only:
            continue
        n = a.sweep_runs if a.sweep_runs and design.settings > 1 else runs
        figures = run(design, noise, n, math.log1p(MINIMUM), seed=1000 + i).figures()
        rows.append(figures)
        coverage = f"{figures['coverage']:.1%}" if figures["coverage"] is not None else "-"
        print(
            f"{design.name:48} {noise.name:28} {figures['decisive']:6.1%} "
            f"[{figures['decisive_low']:.1%}, {figures['decisive_high']:.1%}]".ljust(99)
            + f" {coverage:>8} {figures['requests_used']:8.0%} {figures['runs']}",
            flush=True,
        )
    power = run(  # test_stopping_simulation's design: 48 prompts a class, 4 rounds at most
        Design("stopping, 4 rounds, 48 prompts", prompts=48, rounds=4, stop=True),
        Noise("drift 4%", drift=0.04),
        runs,
        math.log1p(3 * MINIMUM),
        seed=99,
    )
    median_used = statistics.median(power.used)
    print(
        f"stopping, 4 rounds of 48 prompts, drift 4%, at 3x the minimum effect: median "
        f"{median_used:.0%} of the fixed design's requests, {power.decisive / runs:.0%} decided "
        f"({time.perf_counter() - began:.0f} s in all)"
    )
    if a.json:
        a.json.write_text(
            json.dumps({"rows": rows, "median_used_at_3x": median_used}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
