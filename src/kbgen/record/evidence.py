"""The evidence a record's numbers are computed from, and the compact samples file that keeps it.

Evidence is a run's (or an import's) samples plus the server's counter windows per variant, and
nothing else. Beside each measured record it is kept as gzipped JSONL, times relative to each
request's send and without a gzip timestamp, so the same evidence always gives the same bytes and
`kbgen record --check` can recompute every number without the original machine.
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

    @property
    def challenger(self) -> str:
        """The variant judged against the baseline: the first of the others."""
        return next(v for v in self.variants if v != self.baseline)

    def final(self) -> tuple[list[Sample], int, int]:
        """The last successful sample of each request, and the counts of requests / failures.

        A request that failed and then succeeded on a resume counts once, as a success.
        """
        best: dict[tuple[str, str, int, int, int], Sample] = {}
        failed: set[tuple[str, str, int, int, int]] = set()
        for s in self.samples:
            key = (s.variant, s.prompt_class, s.prompt_index, s.repeat, s.round or 0)
            if s.ok:
                if key not in best or s.attempt >= best[key].attempt:
                    best[key] = s
            else:
                failed.add(key)
        failed -= set(best)
        return list(best.values()), len(best) + len(failed), len(failed)


def evidence_of_run(run: RunFolder, spec: ExperimentSpec) -> Evidence:
    """The evidence of a run folder: its samples, and its counter windows from its totals."""
    totals = driver.totals(spec, run).variants
    order = baseline_first(spec.baseline, spec.variants)
    return Evidence(
        baseline=spec.baseline,
        variants=order,
        classes=list(spec.workload.classes),
        samples=run.samples(),
        windows={v: totals[v].windows for v in order if v in totals},
    )


def samples_bytes(evidence: Evidence) -> bytes:
    """The evidence as gzipped JSONL, times relative to each request's send (deterministic)."""
    lines = [
        json.dumps(
            {
                "kind": "evidence",
                "baseline": evidence.baseline,
                "variants": evidence.variants,
                "classes": evidence.classes,
            }
        )
    ]
    for variant, windows in evidence.windows.items():
        lines += [
            json.dumps({"kind": "window", "variant": variant, **w.model_dump(exclude_unset=True)})
            for w in windows
        ]
    for s in evidence.samples:
        base = s.sent_ns
        compact = s.model_copy(
            update={
                "scheduled_ns": s.scheduled_ns - base,
                "sent_ns": 0,
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
        evidence = Evidence(header["baseline"], header["variants"], header["classes"])
        for line in lines[1:]:
            entry = json.loads(line)
            kind = entry.pop("kind")
            if kind == "window":
                variant = entry.pop("variant")
                evidence.windows.setdefault(variant, []).append(Counters.model_validate(entry))
            else:
                evidence.samples.append(Sample.model_validate(entry))
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise InvalidInput([Problem(path, None, "", f"unreadable samples file: {exc}")]) from exc
    return evidence
