"""The evidence a record's numbers are computed from, and the compact samples file that keeps it.

Evidence is samples plus the server's counter windows per variant, nothing else; kept beside a
measured record as deterministic gzipped JSONL, from which `kbgen record --check` recomputes
every number (docs/design.md, "Evidence and the samples file").
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from kbgen import redact
from kbgen.bench.totals import totals as run_totals
from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files
from kbgen.kb.models import Load, Model, baseline_first
from kbgen.kb.numbers import Finite, Int
from kbgen.kb.problems import problems_of
from kbgen.run.counters import Counters
from kbgen.run.folder import MAX_SAMPLES_BYTES, RunFolder
from kbgen.run.models import PrefixDesign
from kbgen.run.samples import Sample, clock_of, request_of
from kbgen.run.spec import ExperimentSpec


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
    torn: int = 0  # lines of the run's samples.jsonl dropped as torn by a kill (not kept)
    concurrency: int = 1  # streams the client ran: what a window's steady state is judged by
    request_rate: float | None = None  # an open loop's rate, where its loads do not set one
    prefixes: PrefixDesign | None = None  # the shared prefixes' design, where requests drew one
    loads: list[Load] = field(default_factory=lambda: [{}])  # a sweep's load levels, in order
    # class -> each prompt's group (by prompt index), where the suite names them
    groups: dict[str, list[str | None]] | None = None
    turns: int | None = None  # multi-turn sessions' turns: a class's prompts, this many a session

    @property
    def challenger(self) -> str:
        """The variant judged against the baseline: the first of the others."""
        return next(v for v in self.variants if v != self.baseline)

    @property
    def challengers(self) -> list[str]:
        """Every variant judged against the baseline, in order."""
        return [v for v in self.variants if v != self.baseline]

    @property
    def open_loop(self) -> bool:
        """Whether its requests were sent at a request rate (each sample says so): the closed
        loop's figures (a window's steady state, throughput by Little's law) do not apply."""
        return any(s.on_schedule for s in self.samples)

    def rate_at(self, level: int) -> float | None:
        """The requests per second the schedule offered at load level `level` (None: closed
        loop)."""
        rate = self.loads[level].get("request_rate", self.request_rate)
        return None if rate in (None, "inf") else float(rate)

    def concurrency_at(self, level: int) -> int:
        """The streams the client ran at load level `level`."""
        return self.loads[level].get("concurrency", self.concurrency)

    def final(self) -> tuple[list[Sample], int, int]:
        """The last successful sample of each request, and the counts of attempts / failures.

        Every attempt counts: a request that failed and then succeeded on a resume is one
        success and one failed attempt (a variant whose slow requests die and are retried must
        not look as clean as one whose requests never failed).
        """
        best: dict[tuple[str, str, int, int, int, int], Sample] = {}
        for s in self.samples:
            if s.ok:
                key = request_of(s)
                if key not in best or s.attempt >= best[key].attempt:
                    best[key] = s
        failed = sum(1 for s in self.samples if not s.ok)
        return list(best.values()), len(self.samples), failed

    def attempts(self) -> dict[tuple[str, str, int], Attempts]:
        """Per (variant, class, load level): attempts, failed attempts and requests that never
        succeeded."""
        out: dict[tuple[str, str, int], Attempts] = {}
        succeeded = {request_of(s) for s in self.samples if s.ok}
        arms: dict[tuple[str, str, int], list[Sample]] = {}
        for s in self.samples:
            arms.setdefault((s.variant, s.prompt_class, s.level or 0), []).append(s)
        for key, mine in arms.items():
            lost = {request_of(s) for s in mine if not s.ok} - succeeded
            out[key] = Attempts(len(mine), sum(1 for s in mine if not s.ok), len(lost))
        return out


def at_level(evidence: Evidence, level: int) -> Evidence:
    """The evidence of one load level of a sweep: its samples and windows, its concurrency (the
    evidence itself for a run of one load)."""
    if len(evidence.loads) == 1:
        return evidence
    return dataclasses.replace(
        evidence,
        samples=[s for s in evidence.samples if (s.level or 0) == level],
        windows={
            v: [w for w in ws if (w.level or 0) == level] for v, ws in evidence.windows.items()
        },
        concurrency=evidence.concurrency_at(level),
        loads=[evidence.loads[level]],
    )


@dataclass(frozen=True)
class Attempts:
    """What one arm sent for one class, counting every attempt (resumes included)."""

    attempts: int
    failed: int  # failed attempts, those a resume replaced included
    lost: int  # requests that never succeeded

    @property
    def failure_rate(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0


def evidence_of_run(run: RunFolder, spec: ExperimentSpec) -> Evidence:
    """The evidence of a run folder: its samples, and a counter window per measurement window.

    A window whose closing `/metrics` scrape failed has no counters; it is kept as an empty
    `Counters` (no cross-check) so the verdict can say so instead of not seeing it. Each window
    carries the machine load measured meanwhile.
    """
    meta = run.meta()
    if meta.cluster is not None:  # the blocks pooled, each sample marked with its block
        parts = [evidence_of_run(b, b.spec()) for b in run.blocks()]
        turns = spec.workload.sessions.turns if spec.workload.sessions else None
        return dataclasses.replace(pooled(parts), groups=meta.groups, turns=turns)
    read = run.read_samples()  # each read once, shared with the totals
    samples = read.samples
    totals = run_totals(spec, run, meta, samples).variants
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
        torn=len(read.torn),
        concurrency=spec.workload.concurrency,
        request_rate=spec.workload.request_rate
        or (meta.traffic.rate_rps if meta.traffic else None),
        prefixes=None
        if meta.prefixes is None or spec.workload.sessions is not None  # histories: no design
        else PrefixDesign.model_validate(
            meta.prefixes.model_dump(include=set(PrefixDesign.model_fields))
        ),
        loads=spec.loads,
        groups=meta.groups,
        turns=spec.workload.sessions.turns if spec.workload.sessions else None,
    )


def pooled(parts: list[Evidence]) -> Evidence:
    """The evidence of a run's blocks as one: every sample with its block (its index in
    `parts`), every window, every torn line."""
    return dataclasses.replace(
        parts[0],
        samples=[s.model_copy(update={"block": i}) for i, e in enumerate(parts) for s in e.samples],
        windows={v: [w for e in parts for w in e.windows.get(v, [])] for v in parts[0].variants},
        torn=sum(e.torn for e in parts),
    )


def samples_bytes(evidence: Evidence) -> bytes:
    """The evidence as gzipped JSONL, times relative to each request's send (deterministic)."""
    header: dict[str, Any] = {
        "kind": "evidence",
        "baseline": evidence.baseline,
        "variants": evidence.variants,
        "classes": evidence.classes,
    }
    if not evidence.paired:
        header["paired"] = False
    if evidence.concurrency > 1:  # unset for one stream: its samples files keep their bytes
        header["concurrency"] = evidence.concurrency
    if evidence.request_rate is not None:  # an open loop's, likewise
        header["request_rate"] = evidence.request_rate
    if evidence.prefixes is not None:  # likewise
        header["prefixes"] = evidence.prefixes.model_dump(exclude_none=True)
    if len(evidence.loads) > 1:  # unset for one load, likewise
        header["loads"] = evidence.loads
    if evidence.groups:
        header["groups"] = evidence.groups
    if evidence.turns is not None:
        header["turns"] = evidence.turns
    lines = [json.dumps(header)]
    for variant, windows in evidence.windows.items():
        lines += [
            json.dumps({"kind": "window", "variant": variant, **w.model_dump(exclude_unset=True)})
            for w in windows
        ]
    # times relative to the first send on the same clock (one process), so a window's
    # throughput can still be computed from its samples
    origin: dict[tuple[int, int], int] = {}
    for s in evidence.samples:
        origin[clock_of(s)] = min(origin.get(clock_of(s), s.sent_ns), s.sent_ns)
    for s in evidence.samples:
        base = origin[clock_of(s)]
        compact = s.model_copy(
            update={
                "error": s.error and redact.text(s.error),  # a server's message may quote secrets
                "scheduled_ns": s.scheduled_ns - base,
                "ready_ns": None if s.ready_ns is None else s.ready_ns - base,
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


def read_samples_file(path: Path, inside: Path | None = None) -> bytes:
    """The bytes of a samples file, read inside `inside`, the record's folder: a samples path
    through a symlink that leads out of it is refused (`files.read_regular`)."""
    return files.read_regular(path, MAX_SAMPLES_BYTES, inside)


class _Header(Model):
    """The first line of a samples file."""

    kind: Literal["evidence"]
    baseline: str
    variants: list[str]
    classes: list[str]
    paired: bool = True
    concurrency: Int = Field(default=1, ge=1)
    request_rate: Finite | None = Field(default=None, gt=0)
    prefixes: PrefixDesign | None = None
    loads: list[Load] = Field(default_factory=lambda: [Load()], min_length=1)
    groups: dict[str, list[str | None]] | None = None
    turns: Int | None = Field(default=None, ge=2)


def read_samples(path: Path, packed: bytes | None = None) -> Evidence:
    """The evidence of a samples file written by `samples_bytes` (its bytes `packed`, or read
    by `read_samples_file`), unpacked to at most MAX_SAMPLES_BYTES; a line that is not what
    `samples_bytes` writes is an InvalidInput at its line."""
    text = _gunzip(path, read_samples_file(path) if packed is None else packed)
    lines = text.split(b"\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the final newline
    entry = _line(path, 1, lines[0])
    try:
        header = _Header.model_validate(entry)
    except ValidationError as exc:
        raise InvalidInput(
            [dataclasses.replace(p, line=1) for p in problems_of(path, exc)]
        ) from exc
    evidence = Evidence(
        header.baseline,
        header.variants,
        header.classes,
        paired=header.paired,
        concurrency=header.concurrency,
        request_rate=header.request_rate,
        prefixes=header.prefixes,
        loads=header.loads,
        groups=header.groups,
        turns=header.turns,
    )
    for number, line in enumerate(lines[1:], start=2):
        entry = _line(path, number, line)
        kind = entry.pop("kind", None)
        try:
            if kind == "window":
                variant = str(entry.pop("variant", ""))
                evidence.windows.setdefault(variant, []).append(Counters.model_validate(entry))
            elif kind == "sample":
                evidence.samples.append(Sample.model_validate(entry))
            else:
                raise InvalidInput([Problem(path, number, "kind", f"unknown kind {kind!r}")])
        except ValidationError as exc:
            problems = [dataclasses.replace(p, line=number) for p in problems_of(path, exc)]
            raise InvalidInput(problems) from exc
    return evidence


def _line(path: Path, number: int, line: bytes) -> dict[str, Any]:
    """One line of a samples file: a JSON object, or InvalidInput at its line."""
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError) as exc:
        message = f"not a line of a samples file: {files.json_fault(exc)}"
        raise InvalidInput([Problem(path, number, "", message)]) from exc
    if not isinstance(entry, dict):
        raise InvalidInput([Problem(path, number, "", "not a line of a samples file")])
    return entry


def _gunzip(path: Path, packed: bytes) -> bytes:
    """The gzip stream unpacked, refused past MAX_SAMPLES_BYTES (a small file can unpack to
    gigabytes)."""
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        text = unpacker.decompress(packed, MAX_SAMPLES_BYTES + 1)
    except zlib.error as exc:
        raise InvalidInput([Problem(path, None, "", f"not a gzip file: {exc}")]) from exc
    if len(text) > MAX_SAMPLES_BYTES:
        message = f"unpacks to more than {MAX_SAMPLES_BYTES:,} bytes, the limit"
        raise InvalidInput([Problem(path, None, "", message)])
    if not unpacker.eof:
        raise InvalidInput([Problem(path, None, "", "a truncated gzip file")])
    return text
