"""The evidence a record's numbers are computed from, and the compact samples file that keeps it.

Evidence is a run's (or an import's) samples plus the server's counter windows per variant, and
nothing else. Beside each measured record it is kept as gzipped JSONL, times relative to the
first send of the same attempt and without a gzip timestamp, so the same evidence always gives
the same bytes and `kbgen record --check` can recompute every number without the original
machine.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from kbgen.bench import driver
from kbgen.bench.metrics import Counters
from kbgen.bench.runs import RunFolder
from kbgen.bench.samples import Sample
from kbgen.bench.spec import ExperimentSpec
from kbgen.errors import InvalidInput, Problem
from kbgen.kb.models import baseline_first


@dataclass
class Evidence:
    """Everything a record's numbers are computed from, and nothing else."""

    baseline: str
    variants: list[str]  # in order, baseline first
    classes: list[str]
    samples: list[Sample] = field(default_factory=list)
    windows: dict[str, list[Counters]] = field(default_factory=dict)  # server counters
    # False when the arms' requests cannot be paired by prompt (an import that cannot show both
    # files used the same prompts): the verdict then treats requests as independent draws
    paired: bool = True

    @property
    def challenger(self) -> str:
        """The variant judged against the baseline: the first of the others."""
        return next(v for v in self.variants if v != self.baseline)

    def final(self) -> tuple[list[Sample], int, int]:
        """The last successful sample of each request, and the counts of attempts / failures.

        Every attempt counts: a request that failed and then succeeded on a resume is one
        success and one failed attempt (a variant whose slow requests die and are retried must
        not look as clean as one whose requests never failed).
        """
        best: dict[tuple[str, str, int, int, int], Sample] = {}
        for s in self.samples:
            if s.ok:
                key = _request(s)
                if key not in best or s.attempt >= best[key].attempt:
                    best[key] = s
        failed = sum(1 for s in self.samples if not s.ok)
        return list(best.values()), len(self.samples), failed

    def attempts(self) -> dict[tuple[str, str], Attempts]:
        """Per (variant, class): attempts, failed attempts and requests that never succeeded."""
        out: dict[tuple[str, str], Attempts] = {}
        succeeded = {_request(s) for s in self.samples if s.ok}
        for key in {(s.variant, s.prompt_class) for s in self.samples}:
            mine = [s for s in self.samples if (s.variant, s.prompt_class) == key]
            lost = {_request(s) for s in mine if not s.ok} - succeeded
            out[key] = Attempts(len(mine), sum(1 for s in mine if not s.ok), len(lost))
        return out


@dataclass(frozen=True)
class Attempts:
    """What one arm sent for one class, counting every attempt (resumes included)."""

    attempts: int
    failed: int  # failed attempts, those a resume replaced included
    lost: int  # requests that never succeeded

    @property
    def failure_rate(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0


def _request(s: Sample) -> tuple[str, str, int, int, int]:
    """Which request of the plan a sample measures (a round without rounds is round 0)."""
    return (s.variant, s.prompt_class, s.prompt_index, s.round or 0, s.repeat)


def evidence_of_run(run: RunFolder, spec: ExperimentSpec) -> Evidence:
    """The evidence of a run folder: its samples, and a counter window per measurement window.

    A window whose closing `/metrics` scrape failed has no counters; it is kept as an empty
    `Counters` (no cross-check) so the verdict can say so instead of not seeing it. Each window
    carries the machine load measured meanwhile.
    """
    meta, samples = run.meta(), run.samples()  # each read once, shared with the totals
    totals = driver.totals(spec, run, meta, samples).variants
    order = baseline_first(spec.baseline, spec.variants)
    windows: dict[str, list[Counters]] = {}
    for v in order:
        if v not in totals or v not in meta.variants:
            continue
        counted = iter(totals[v].windows)  # one per window with its closing scrape, in order
        windows[v] = []
        for w in meta.variants[v].windows:
            counters = next(counted, None) if w.after else None
            if counters is None:
                counters = Counters()
            if w.load is not None and counters.load is None:
                counters.load = w.load
            windows[v].append(counters)
    return Evidence(
        baseline=spec.baseline,
        variants=order,
        classes=list(spec.workload.classes),
        samples=samples,
        windows=windows,
    )


def samples_bytes(evidence: Evidence) -> bytes:
    """The evidence as gzipped JSONL, times relative to each request's send (deterministic)."""
    header = {
        "kind": "evidence",
        "baseline": evidence.baseline,
        "variants": evidence.variants,
        "classes": evidence.classes,
    }
    lines = [json.dumps(header if evidence.paired else {**header, "paired": False})]
    for variant, windows in evidence.windows.items():
        lines += [
            json.dumps({"kind": "window", "variant": variant, **w.model_dump(exclude_unset=True)})
            for w in windows
        ]
    # times relative to the first send of the same attempt (one process: one clock), so a
    # window's throughput can still be computed from its samples
    origin: dict[int, int] = {}
    for s in evidence.samples:
        origin[s.attempt] = min(origin.get(s.attempt, s.sent_ns), s.sent_ns)
    for s in evidence.samples:
        base = origin[s.attempt]
        compact = s.model_copy(
            update={
                "scheduled_ns": s.scheduled_ns - base,
                "sent_ns": s.sent_ns - base,
                "chunk_ns": [t - base for t in s.chunk_ns],
                "done_ns": None if s.done_ns is None else s.done_ns - base,
            }
        )
        lines.append(json.dumps({"kind": "sample", **compact.model_dump(exclude_none=True)}))
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as out:
        out.write(("\n".join(lines) + "\n").encode())
    return buffer.getvalue()


def read_samples(path: Path) -> Evidence:
    """The evidence of a samples file written by `samples_bytes`."""
    try:
        lines = gzip.decompress(path.read_bytes()).decode().splitlines()
        header = json.loads(lines[0])
        evidence = Evidence(
            header["baseline"],
            header["variants"],
            header["classes"],
            paired=header.get("paired", True),
        )
        for line in lines[1:]:
            entry = json.loads(line)
            kind = entry.pop("kind")
            if kind == "window":
                variant = entry.pop("variant")
                evidence.windows.setdefault(variant, []).append(Counters.model_validate(entry))
            else:
                evidence.samples.append(Sample.model_validate(entry))
    # a line of another shape (not an object, too deep) fails as a type or recursion error
    except (
        OSError,
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        AttributeError,
        RecursionError,
    ) as exc:
        raise InvalidInput([Problem(path, None, "", f"unreadable samples file: {exc}")]) from exc
    return evidence
