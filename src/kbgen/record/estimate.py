"""`kbgen bench SPEC --estimate`: what a spec's design will cost, before anything starts.

From the knowledge base's earlier measured records on the same model and hardware: their
start-ups, their requests' times, their per-prompt spread; and whether the design's prompts can
decide the minimum effect at that spread (docs/design.md, "Stopping").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

from kbgen.kb.models import Hardware, Record
from kbgen.kb.questions import hardware as hardware_words
from kbgen.record import cost, stats
from kbgen.record.rule import CONFIDENCE, toward
from kbgen.run import design as plan
from kbgen.run.design import Design
from kbgen.run.spec import ExperimentSpec, ProcessServer


@dataclass
class Estimate:
    """A design's cost, planned: what `lines` prints."""

    spec: ExperimentSpec
    prompts: int  # per class and round
    records: list[str] = field(default_factory=list)  # the earlier records it rests on
    startup_s: float | None = None  # a server start's, their mean
    request_s: dict[str, float] = field(default_factory=dict)  # class -> a request's seconds
    spread: float | None = None  # of the per-prompt log ratios, pooled over classes
    distance: float | None = None  # the median of the earlier effects' distance from the minimum
    warnings: list[str] = field(default_factory=list)

    def windows(self, rounds: int | None = None) -> list[plan.Step]:
        """The design's windows in order; the first `rounds` rounds' only, with `rounds`."""
        planned = plan.steps(plan.windows(self.spec))
        return [s for s in planned if rounds is None or s[0] < rounds]

    def window_s(self, level: int = 0) -> float | None:
        """One window's seconds at load level `level`: each class's requests at a request's
        time, `concurrency` at once."""
        if not self.request_s:
            return None
        workload = self.spec.workload_at(level)
        per_class = self.prompts * workload.repeats
        sent = sum(
            per_class * self.request_s.get(c, fmean(self.request_s.values()))
            for c in workload.classes
        )
        return sent / workload.concurrency

    def minutes(self, rounds: int | None = None) -> float | None:
        """Wall time of the design's starts and windows (its first `rounds` rounds)."""
        steps = self.windows(rounds)
        if not self.request_s:
            return None
        windows = sum(self.window_s(level) or 0.0 for _, _, level in steps)
        return (cost.starts(steps) * (self.startup_s or 0.0) + windows) / 60

    def needed(self, anytime: bool, distance: float | None = None) -> int | None:
        """Prompts per class for an interval of half-width `distance` (log scale; default the
        minimum effect: an effect of 0 refuted, one of twice the minimum supported) at the
        spread, never fewer than the hypothesis' `min_prompts`; `anytime`: at the share of the
        error of the first round that may stop."""
        hypothesis = self.spec.hypothesis
        distance = math.log1p(hypothesis.minimum_effect) if distance is None else distance
        spec = self.spec
        comparisons = (len(spec.variants) - 1) * len(spec.loads) * len(spec.workload.classes)
        level = 1 - (1 - CONFIDENCE) / comparisons
        if anytime:  # at the first look's share of the error
            design = Design(self.spec.workload.rounds)
            level = design.level_at(design.looks()[0], level) or level
        needed = stats.units_needed(self.spread, distance, level)
        return None if needed is None else max(needed, hypothesis.min_prompts)

    def lines(self, accelerators: int | None) -> list[str]:
        """The estimate in words, a line each."""
        spec, steps = self.spec, self.windows()
        stopping = plan.design_of(spec.workload) is not None
        out = [
            f"design: {'stops when decided, at most' if stopping else 'fixed,'} "
            f"{spec.workload.rounds} round(s): {cost.starts(steps)} server start(s), "
            f"{len(steps)} window(s), {self.prompts} prompt(s) per class"
        ]
        if spec.workload.rounds == 1 and not spec.workload.accept_time_confound:
            two = plan.steps(
                plan.windows(
                    spec.model_copy(
                        update={"workload": spec.workload.model_copy(update={"rounds": 2})}
                    )
                )
            )
            out.append(
                f"warning: one round decides nothing (its arms ran one after the other, "
                f"confounded with time): rounds: 2 costs {cost.starts(two)} server start(s) and "
                f"{len(two)} window(s), or accept it with workload.accept_time_confound: true"
            )
        if not self.records:
            out.append("no earlier record on this model and hardware to estimate from: no figures")
            return out + self.warnings
        out.append(f"from {len(self.records)} earlier record(s): {', '.join(self.records)}")
        if self.startup_s is not None:
            out.append(f"a server start: about {_took(self.startup_s)}")
        else:
            out.append("a server start: not recorded by the earlier records (counted as 0)")
        if (window := self.window_s()) is not None:
            out.append(f"a window: about {_took(window)}")
        total = self.minutes()
        if total is not None:
            acc = f", {total * accelerators:.1f} accelerator-minutes" if accelerators else ""
            out.append(f"the whole design: about {_took(total * 60)}{acc}")
            early = self.minutes(2)
            if stopping and spec.workload.rounds > 2 and early is not None:
                out.append(
                    f"stopped at its first look (round 2): about {_took(early * 60)}, "
                    f"{cost.starts(self.windows(2))} start(s)"
                )
        if self.spread is not None:
            fixed, anytime = self.needed(False), self.needed(True)
            needs = fixed if not stopping else anytime
            m = spec.hypothesis.minimum_effect
            out.append(
                f"per-prompt spread {self.spread:.3f} (log): an effect as near the minimum "
                f"effect as 0% or {math.expm1(2 * math.log1p(m)):+.1%} (the minimum effect "
                f"{m:.1%} either way) needs about {_count(needs)} prompts per class"
                f"{' at the first look' if stopping else ''} "
                f"({_count(fixed)} fixed, {_count(anytime)} stopping when decided)"
            )
            if self.distance is not None:
                out.append(
                    f"the earlier records' effects lay {math.expm1(self.distance):.1%} from the "
                    f"minimum effect in the median: one as far needs about "
                    f"{_count(self.needed(stopping, self.distance))} prompts per class"
                )
            if needs is None or needs > self.prompts:
                out.append(
                    f"warning: {self.prompts} prompts per class cannot decide the minimum "
                    "effect at this spread: add prompts (per_class), or expect inconclusive"
                )
        return out + self.warnings


def estimate(
    spec: ExperimentSpec, prompts: int, hardware: Hardware | None, records: Iterable[Record]
) -> Estimate:
    """The estimate of `spec` (`prompts` per class) on `hardware`, from `records`: the measured
    ones on the same model (the spec's, for a server kbgen starts) and hardware."""
    found = Estimate(spec, prompts)
    model = _served(spec.server) if isinstance(spec.server, ProcessServer) else None
    where = hardware_words(hardware) if hardware is not None else None
    earlier = [
        r
        for r in records
        if r.provenance is not None
        and r.provenance.source == "measured"
        and r.config is not None
        and (model is None or r.config.model.name in model)
        and (where is None or hardware_words(r.config.hardware) == where)
    ]
    if model is None:
        found.warnings.append(
            "the spec names no model (its server is not started by kbgen): "
            "every measured record on this hardware counted"
        )
    found.records = sorted(r.id for r in earlier)
    startups = [s for r in earlier for v in r.startup_s.values() for s in v]
    found.startup_s = fmean(startups) if startups else None
    max_tokens = spec.workload.max_tokens
    times: dict[str, list[float]] = {}
    for r in earlier:
        for per_class in r.measurements.values():
            for cls, metrics in per_class.items():
                decode, ttft = metrics.get("decode_tok_s"), metrics.get("ttft_ms")
                if decode is not None and ttft is not None and decode.mean > 0:
                    times.setdefault(cls, []).append(
                        ttft.mean / 1000 + (max_tokens - 1) / decode.mean
                    )
    found.request_s = {c: fmean(t) for c, t in times.items()}
    variances = [
        statistics.variance(logs)
        for r in earlier
        if r.verdict is not None
        for v in r.verdict.per_class.values()
        if v.unit == "prompt"
        and len(logs := [math.log1p(e) for e in v.per_unit.values() if e > -1]) > 1
    ]
    found.spread = math.sqrt(fmean(variances)) if variances else None
    target = math.log1p(toward(spec.hypothesis, spec.hypothesis.minimum_effect))
    distances = [
        abs(math.log1p(v.effect) - target)
        for r in earlier
        if r.verdict is not None
        for v in r.verdict.per_class.values()
        if v.unit == "prompt" and v.effect > -1
    ]
    found.distance = statistics.median(distances) if distances else None
    concurrencies = {c for r in earlier if r.workload and (c := r.workload.concurrency)}
    if concurrencies and concurrencies != {spec.workload.concurrency}:
        found.warnings.append(
            f"the earlier records ran at concurrency {', '.join(map(str, sorted(concurrencies)))}: "
            "a request's time at another load differs"
        )
    return found


def _served(server: ProcessServer) -> set[str]:
    """The names a server kbgen starts serves its model as: `--served-model-name`'s, else the
    model's path (and its last part)."""
    args = server.args
    if "--served-model-name" in args[:-1]:
        return {args[args.index("--served-model-name") + 1]}
    return {server.model, Path(server.model).name}


def _took(seconds: float) -> str:
    """A duration as one reads it: seconds under two minutes, else minutes."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _count(n: int | None) -> str:
    return "more than 100,000" if n is None else f"{n:,}"
