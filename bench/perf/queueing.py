#!/usr/bin/env python3
"""Does the prompt stay a sound unit under open-loop load? Decisions at the boundary, simulated
through a batching server's queue.

Usage: python bench/perf/queueing.py [--runs 1000] [--quick] [--json FILE] [--mixes N]
       [--load L]... [--noise NAME]... [--calibration RUNS] [--rounds R] [--stall-guard]

Under a request rate, requests in flight together share each engine step: a burst, a stall or
a slower arm slows all of them, and an arm that decodes faster runs smaller batches. kbgen sends
both arms of a round the same schedule (times and prompts) and pairs them by prompt; this checks
whether that keeps the verdict's stated error.

The server batches by iteration: each step gives every request in flight one token (baseline)
or 1 + Binomial(4, its prompt's acceptance) (the speculative arm; acceptance 0.5 scaled by
exp(N(0, 0.15)), the effect's prompt-to-prompt spread of the other simulations), and lasts
STEP_S x (1 + BATCH_COST x the weights in flight, log-normal SD 0.10 by prompt) x the arm's
verify cost x the noise. The verify cost is calibrated (common random numbers, bisection) so
that the true effect on per-request decode tok/s, the estimand kbgen reports (the mean over
prompts of the log ratio of the arms' means), is exactly the minimum effect, +5%, at each load:
every decisive verdict is then wrong. Each request's rate gets a 4% (log) timing noise. The
design: 16 prompts of one class, 2 repeats, 2 rounds in ABBA order, each round's schedule
drawn afresh and sent to both arms, 64 output tokens. Loads: 10% and 75% of the baseline
server's capacity (batches of about 2 and about 12). Noises: Poisson or gamma (burstiness
0.25) arrivals, a 10% linear drift over the run, stalls (0.2% of steps 20 times longer:
everyone in flight waits). Each run is decided by `record.class_verdict.decide`, the prompt
the unit, as an open loop's fixed-design record is. Not simulated here: a design that stops
when decided (its looks), and heavy-tailed prompt effects (decisions.py's t3), which at light
load need a calibration finer than this one's before their rows can be trusted.

Two estimands. By default each run draws its 16 prompts afresh and the truth is the mean over
such draws: a claim about the prompts' population. Under load it misses, because a prompt's
effect depends on the prompts in flight with it (a set whose drafts are accepted more finishes
sooner, runs smaller batches, and speeds every request in it). With `--mixes N` the runs go
round N fixed prompt sets, each calibrated to its own truth over fresh schedules: a claim about
the traffic as sent, the one an open-loop record states (`record.schedule.UNIT_CAVEAT`); the
`mix SD` column is how far the sets' own truths stray from the population's.

`--stall-guard` tries a rule for rare long stalls, which a prompt's interval does not see: a
decisive run decided again without the requests a stall hit as they decoded, where the outcome
changes, is inconclusive (here the stalled steps are known; a real run would have to find them
in its chunks' times, gaps every stream in flight shares).

Printed per load and noise: the share of runs decisive at the boundary with its 95%
Clopper-Pearson interval, the coverage of the interval at the true effect, the mean batch and
the verify cost found (and with `--mixes`, the SD of the sets' truths at the population's cost).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decisions import clopper_pearson

from kbgen.kb.models import Hypothesis, Outcome
from kbgen.record import class_verdict
from kbgen.record.rule import CONFIDENCE

MINIMUM = 0.05
Cells = dict[int, dict[int, list[list[float]]]]  # prompt -> round -> requests' values
PROMPTS, REPEATS, ROUNDS, TOKENS = 16, 2, 2, 64
STEP_S, BATCH_COST = 0.010, 0.08  # an engine step: 10 ms alone, 8% more a request in flight
DRAFT, ACCEPTANCE = 4, 0.5  # the speculative arm: 4 draft tokens, accepted at 0.5 on average
EFFECT_SPREAD, WEIGHT_SPREAD, TIMING_NOISE = 0.15, 0.10, 0.04
STALL_SHARE, STALL_SLOWDOWN = 0.002, 20.0
HYPOTHESIS = Hypothesis(
    statement="faster", primary_metric="decode_tok_s", direction="increase", minimum_effect=MINIMUM
)


@dataclass(frozen=True)
class Noise:
    name: str
    burstiness: float = 1.0  # gamma shape of the gaps; 1 is Poisson
    drift: float = 0.0  # log speed change over the run, linear
    stalls: bool = False
    rounds: int = ROUNDS  # the design's, run under this noise


@dataclass(frozen=True)
class Prompts:
    """The class's prompts: their acceptance (the speculative arm's) and weight in a batch."""

    acceptance: np.ndarray
    weight: np.ndarray


def prompts_of(rng: np.random.Generator) -> Prompts:
    acceptance = np.clip(ACCEPTANCE * np.exp(rng.normal(0, EFFECT_SPREAD, PROMPTS)), 0.0, 1.0)
    return Prompts(acceptance, np.exp(rng.normal(0, WEIGHT_SPREAD, PROMPTS)))


def schedule(
    rng: np.random.Generator, rate: float, burstiness: float
) -> tuple[np.ndarray, np.ndarray]:
    """A round's requests: their arrival times (s) and prompts, the same for both arms."""
    order = rng.permutation(np.repeat(np.arange(PROMPTS), REPEATS))
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), len(order) - 1)
    return np.concatenate([[0.0], np.cumsum(gaps)]), order


def window(
    times: np.ndarray,
    order: np.ndarray,
    prompts: Prompts,
    speculative: bool,
    verify: float,
    rng: np.random.Generator,
    level: float = 0.0,
    drift_per_s: float = 0.0,
    stalls: bool = False,
) -> tuple[np.ndarray, float, np.ndarray]:
    """One arm's window: each request's decode tok/s (by position in the schedule), the mean
    batch over its engine steps, and which requests a stall hit while they decoded."""
    n = len(order)
    produced = np.zeros(n)
    first = np.full(n, np.nan)
    done = np.full(n, np.nan)
    t, admitted, batches, steps = 0.0, 0, 0.0, 0
    active: list[int] = []
    hit = np.zeros(n, dtype=bool)
    cost = verify if speculative else 1.0
    while admitted < n or active:
        if not active and times[admitted] > t:
            t = times[admitted]
        while admitted < n and times[admitted] <= t:
            active.append(admitted)
            admitted += 1
        now = np.array(active)
        mine = order[now]
        step = STEP_S * (1 + BATCH_COST * prompts.weight[mine].sum()) * cost
        step *= math.exp(level + drift_per_s * t)
        if stalls and rng.random() < STALL_SHARE:
            step *= STALL_SLOWDOWN
            hit[now[~np.isnan(first[now])]] = True  # past their first token: decoding
        t += step
        batches += len(active)
        steps += 1
        if speculative:
            tokens = 1 + rng.binomial(DRAFT, prompts.acceptance[mine])
        else:
            tokens = np.ones(len(now))
        fresh = np.isnan(first[now])
        first[now[fresh]] = t  # the prefill's step gives the first token
        produced[now] += np.where(fresh, 1, tokens)
        finished = produced[now] >= TOKENS
        done[now[finished]] = t
        active = [int(i) for i in now[~finished]]
    rates = (TOKENS - 1) / (done - first)
    return rates, batches / steps, hit


def run_once(
    rng: np.random.Generator,
    rate: float,
    noise: Noise,
    verify: float,
    timing: bool = True,
    mix: Prompts | None = None,
) -> tuple[Cells, Cells, float, tuple[Cells, Cells]]:
    """One experiment: the baseline's and the speculative arm's cells (prompt -> round ->
    requests' values), the mean batch, and the cells without the requests a stall hit; over
    `mix` where given, else over prompts drawn afresh."""
    prompts = mix if mix is not None else prompts_of(rng)
    cells: tuple[Cells, Cells] = ({}, {})
    unhit: tuple[Cells, Cells] = ({}, {})
    windows = 2 * noise.rounds
    span = PROMPTS * REPEATS / rate  # a window's length, about
    batches = []
    for r in range(noise.rounds):
        times, order = schedule(rng, rate, noise.burstiness)
        for slot, arm in enumerate((0, 1) if r % 2 == 0 else (1, 0)):
            w = 2 * r + slot
            level = noise.drift * w / windows
            rates, batch, hit = window(
                times,
                order,
                prompts,
                arm == 1,
                verify,
                rng,
                level,
                noise.drift / (windows * span),
                noise.stalls,
            )
            batches.append(batch)
            if timing:
                rates = rates * np.exp(rng.normal(0, TIMING_NOISE, len(rates)))
            for p, value, stalled in zip(order, rates, hit, strict=True):
                cells[arm].setdefault(int(p), {}).setdefault(r, []).append([float(value)])
                if not stalled:
                    unhit[arm].setdefault(int(p), {}).setdefault(r, []).append([float(value)])
    return cells[0], cells[1], float(np.mean(batches)), unhit


def true_effect(
    rate: float, noise: Noise, verify: float, runs: int, seed: int, mix: Prompts | None = None
) -> float:
    """The estimand without timing noise, over `runs` experiments (common random numbers): over
    prompt sets drawn afresh, or over schedules of one set, `mix`."""
    rng = np.random.default_rng(seed)
    logs = []
    for _ in range(runs):
        base, spec, _, _ = run_once(rng, rate, noise, verify, timing=False, mix=mix)
        for p in base:
            b = np.mean([v[0] for r in base[p].values() for v in r])
            s = np.mean([v[0] for r in spec[p].values() for v in r])
            logs.append(math.log(s / b))
    return float(np.mean(logs))


def calibrate(rate: float, noise: Noise, runs: int, mix: Prompts | None = None) -> float:
    """The verify cost at which the true effect is the minimum effect (bisection)."""
    low, high = 1.0, 4.0
    target = math.log1p(MINIMUM)
    for _ in range(12):
        mid = (low + high) / 2
        if true_effect(rate, noise, mid, runs, seed=7, mix=mix) > target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def rate_for(load: float) -> float:
    """The request rate at `load` times the baseline server's capacity: a batch of B gives B
    tokens a step of STEP_S × (1 + BATCH_COST × B), at most 1 / (STEP_S × BATCH_COST) tokens/s
    however large the batch."""
    return load / (TOKENS * STEP_S * BATCH_COST)


def decide(
    runs: int,
    load: float,
    noise: Noise,
    calibration_runs: int,
    seed: int,
    mixes: int = 0,
    stall_guard: bool = False,
) -> dict[str, Any]:
    """Decisions at the boundary: over prompt sets drawn afresh each run, the truth their mean
    (`mixes` 0), or over `mixes` fixed prompt sets, each one's own truth its boundary. With
    `stall_guard`, a decisive run that decided again without the requests a stall hit (known
    here; a real run would find them in its chunks' times) comes out otherwise is inconclusive,
    as the client-lag rule does."""
    rate = rate_for(load)
    verify = calibrate(rate, noise, calibration_runs)
    rng = np.random.default_rng(seed)
    sets = [prompts_of(rng) for _ in range(mixes)]
    spread = [true_effect(rate, noise, verify, calibration_runs, 11, m) for m in sets]
    costs = [calibrate(rate, noise, calibration_runs, m) for m in sets]
    decisive = covered = intervals = 0
    batches = []
    for i in range(runs):
        mix, cost = (sets[i % mixes], costs[i % mixes]) if mixes else (None, verify)
        base, spec, batch, unhit = run_once(rng, rate, noise, cost, mix=mix)
        batches.append(batch)
        found, _ = class_verdict.decide(base, spec, HYPOTHESIS, confidence=CONFIDENCE)
        decided = found.outcome in (Outcome.SUPPORTED, Outcome.REFUTED)
        if decided and stall_guard and unhit != (base, spec):
            decided = _again(unhit) == found.outcome
        decisive += decided
        if found.ci_low is not None and found.ci_high is not None:
            intervals += 1
            covered += found.ci_low <= MINIMUM <= found.ci_high
    low, high = clopper_pearson(decisive, runs)
    return {
        "load": load,
        "rate": rate,
        "noise": noise.name,
        "runs": runs,
        "mixes": mixes,
        "rounds": noise.rounds,
        "stall_guard": stall_guard,
        "decisive": decisive / runs,
        "decisive_low": low,
        "decisive_high": high,
        "coverage": covered / intervals if intervals else None,
        "mean_batch": float(np.mean(batches)),
        "verify_cost": verify,
        "mix_sd": float(np.std(np.expm1(spread), ddof=1)) if mixes > 1 else None,
    }


def _again(cells: tuple[Cells, Cells]) -> Outcome | None:
    """The outcome over `cells` (None: no prompt left in both arms)."""
    try:
        return class_verdict.decide(*cells, HYPOTHESIS, confidence=CONFIDENCE)[0].outcome
    except ValueError:
        return None


LOADS = (0.1, 0.75)  # of the baseline server's capacity: a light load and a heavy one
NOISES = [
    Noise("poisson"),
    Noise("bursts (gamma 0.25)", burstiness=0.25),
    Noise("drift 10%", drift=0.10),
    Noise("stalls", stalls=True),
    Noise("bursts + drift + stalls", burstiness=0.25, drift=0.10, stalls=True),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--mixes",
        type=int,
        default=0,
        help="decide over this many fixed prompt sets, each at its own truth (the traffic as "
        "sent, the estimand an open-loop record states); 0: prompt sets drawn afresh",
    )
    parser.add_argument("--load", type=float, action="append", help="only these loads")
    parser.add_argument("--noise", action="append", help="only these noises (by name)")
    parser.add_argument("--calibration", type=int, help="runs a calibration step (200)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds a run (2)")
    parser.add_argument(
        "--stall-guard",
        action="store_true",
        help="a decisive run whose outcome changes without the requests a stall hit is "
        "inconclusive",
    )
    a = parser.parse_args()
    runs, calibration = (400, 40) if a.quick else (a.runs, a.calibration or 200)
    began = time.perf_counter()
    rows = []
    print(
        f"{'load':>5} {'rate/s':>7} {'noise':26} {'decisive':>22} {'coverage':>8} batch verify"
        + " mix SD" * bool(a.mixes)
    )
    for i, (load, noise) in enumerate((x, n) for x in LOADS for n in NOISES):
        if a.quick and not a.noise and noise.name not in ("poisson", "bursts + drift + stalls"):
            continue
        if (a.load and load not in a.load) or (a.noise and noise.name not in a.noise):
            continue
        noise = replace(noise, rounds=a.rounds)
        row = decide(runs, load, noise, calibration, 100 + i, a.mixes, a.stall_guard)
        rows.append(row)
        coverage = f"{row['coverage']:.1%}" if row["coverage"] is not None else "-"
        print(
            f"{load:5.0%} {row['rate']:7.2f} {noise.name:26} {row['decisive']:6.1%} "
            f"[{row['decisive_low']:.1%}, {row['decisive_high']:.1%}]".ljust(64)
            + f" {coverage:>8} {row['mean_batch']:5.1f} {row['verify_cost']:.3f}"
            + (f" {row['mix_sd']:.3f}" if row["mix_sd"] is not None else ""),
            flush=True,
        )
    print(f"({time.perf_counter() - began:.0f} s in all)")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
