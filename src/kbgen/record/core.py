"""`kbgen record`: from a run (or another tool's results) to a record with an honest verdict.

The evidence is a list of samples plus the server's counter windows. From it come the
measurements (per variant × class × metric), the speculative-decoding figures and the verdict.
The same function computes them when a record is written and when `kbgen record --check`
recomputes a record from the compact samples stored beside it, so a reviewer can confirm every
number without the original machine.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbgen import __version__, redact
from kbgen.bench.runs import RunFolder
from kbgen.bench.samples import Sample
from kbgen.bench.spec import ExperimentSpec
from kbgen.bench.spec import load as load_spec
from kbgen.errors import InvalidInput, Mismatch, Problem, UsageError
from kbgen.kb import files, store
from kbgen.kb import loading as kb
from kbgen.kb.models import Hypothesis, Outcome, Record, Status
from kbgen.record import importers as imports
from kbgen.record import stats, verdict

CONFIDENCE = 0.95
SIGNIFICANT = 6  # digits kept on a record: enough to recompute, short enough to read
PER_REQUEST = ("decode_tok_s", "ttft_ms", "tpot_ms", "e2e_ms")
PER_TOKEN = ("itl_ms", "chunk_gap_ms")


@dataclass
class Evidence:
    """Everything a record's numbers are computed from, and nothing else."""

    baseline: str
    variants: list[str]  # in order, baseline first
    classes: list[str]
    samples: list[Sample] = field(default_factory=list)
    windows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # server counters

    def final(self) -> tuple[list[Sample], int, int]:
        """The last successful sample of each request, and the counts of requests / failures.

        A request that failed and then succeeded on a resume counts once, as a success.
        """
        best: dict[tuple[str, str, int, int], Sample] = {}
        failed: set[tuple[str, str, int, int]] = set()
        for s in self.samples:
            key = (s.variant, s.prompt_class, s.prompt_index, s.repeat)
            if s.ok:
                if key not in best or s.attempt >= best[key].attempt:
                    best[key] = s
            else:
                failed.add(key)
        failed -= set(best)
        return list(best.values()), len(best) + len(failed), len(failed)


def _round(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    return float(f"{value:.{SIGNIFICANT}g}")


def _rounded(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v if k == "n" else _round(v) for k, v in summary.items() if v is not None}


def measurements(evidence: Evidence) -> dict[str, Any]:
    """variant → class → metric → summary, from the final successful samples."""
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for sample in evidence.final()[0]:
        m = sample.metrics()
        for metric in PER_REQUEST:
            if metric in m:
                values[(sample.variant, sample.prompt_class, metric)].append(m[metric])
        for metric in PER_TOKEN:
            values[(sample.variant, sample.prompt_class, metric)].extend(m.get(metric, []))
    out: dict[str, Any] = {}
    for variant in evidence.variants:
        for cls in evidence.classes:
            for metric in (*PER_REQUEST, *PER_TOKEN):
                series = values.get((variant, cls, metric))
                if series:
                    out.setdefault(variant, {}).setdefault(cls, {})[metric] = _rounded(
                        stats.summary(series)
                    )
    return out


def spec_decode(evidence: Evidence) -> dict[str, Any]:
    """Acceptance figures per variant, from the summed counter deltas of its windows."""
    out: dict[str, Any] = {}
    for variant, windows in evidence.windows.items():
        parts = [w["spec_decode"] for w in windows if "spec_decode" in w]
        if not parts:
            continue
        drafts = sum(p["drafts"] for p in parts)
        draft_tokens = sum(p["draft_tokens"] for p in parts)
        accepted = sum(p["accepted_tokens"] for p in parts)
        positions = max(len(p["accepted_per_position"]) for p in parts)
        per_pos = [
            sum(p["accepted_per_position"][i] for p in parts if i < len(p["accepted_per_position"]))
            for i in range(positions)
        ]
        out[variant] = {
            "drafts": int(drafts),
            "draft_tokens": int(draft_tokens),
            "accepted_tokens": int(accepted),
            "acceptance_rate": _round(accepted / draft_tokens) if draft_tokens else None,
            "mean_acceptance_length": _round(1 + accepted / drafts) if drafts else None,
            "per_position_acceptance": [_round(a / drafts) for a in per_pos] if drafts else None,
        }
    return {k: {f: v for f, v in d.items() if v is not None} for k, d in out.items()}


def _decide(
    evidence: Evidence,
    hypothesis: Hypothesis,
    effects: dict[str, stats.Effect | None],
    guards: verdict.Guards,
    caveats: list[str],
    summary_only: bool,
) -> dict[str, Any]:
    """The verdict on the first non-baseline variant from its effect in each class."""
    per_class: dict[str, Any] = {}
    notes = []
    for cls, effect in effects.items():
        if effect is None:
            notes.append(f"{cls}: no {hypothesis.primary_metric} on one side")
            continue
        outcome, why = verdict.class_outcome(effect, hypothesis, guards)
        if why:
            notes.append(f"{cls}: {why}")
        figures = {
            "outcome": str(outcome),
            "effect": _round(effect.effect),
            "ci_low": _round(effect.ci_low),
            "ci_high": _round(effect.ci_high),
            "n_baseline": effect.n_baseline,
            "n_variant": effect.n_variant,
        }
        per_class[cls] = {k: v for k, v in figures.items() if v is not None}
    outcomes = [Outcome(c["outcome"]) for c in per_class.values()]
    decided: dict[str, Any] = {
        "outcome": str(verdict.overall(outcomes)),
        "variant": next(v for v in evidence.variants if v != evidence.baseline),
        "method": "summary" if summary_only else "bootstrap",
        "confidence": None if summary_only else CONFIDENCE,
        "rule": verdict.rule_text(hypothesis, CONFIDENCE, summary_only=summary_only),
        "per_class": per_class,
        "caveats": [*caveats, *dict.fromkeys(notes)],
    }
    return {k: v for k, v in decided.items() if v is not None}


def judge_summaries(
    evidence: Evidence,
    summaries: dict[str, Any],
    hypothesis: Hypothesis,
    caveats: list[str],
    allow: bool,
) -> dict[str, Any]:
    """A verdict from means alone (no samples, so no interval): inconclusive unless allowed."""
    challenger = next(v for v in evidence.variants if v != evidence.baseline)
    metric = hypothesis.primary_metric
    effects: dict[str, stats.Effect | None] = {}
    for cls in evidence.classes:
        base = summaries.get(evidence.baseline, {}).get(cls, {}).get(metric)
        other = summaries.get(challenger, {}).get(cls, {}).get(metric)
        effects[cls] = (
            stats.Effect(
                other["mean"] / base["mean"] - 1, None, None, base.get("n", 0), other.get("n", 0)
            )
            if base and other
            else None
        )
    return _decide(
        evidence,
        hypothesis,
        effects,
        verdict.Guards(allow_summary_only=allow),
        caveats,
        summary_only=True,
    )


def judge(evidence: Evidence, hypothesis: Hypothesis, caveats: list[str]) -> dict[str, Any]:
    """The verdict with bootstrap intervals over the final successful samples."""
    final, total, failed = evidence.final()
    challenger = next(v for v in evidence.variants if v != evidence.baseline)
    tokens_match = [w.get("tokens_match") for ws in evidence.windows.values() for w in ws]
    guards = verdict.Guards(
        failure_rate=failed / total if total else 0.0,
        tokens_match=None if not tokens_match else all(t is not False for t in tokens_match),
    )
    metric = hypothesis.primary_metric
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for sample in final:
        if metric in (m := sample.metrics()):
            values[(sample.variant, sample.prompt_class)].append(m[metric])
    effects: dict[str, stats.Effect | None] = {}
    for cls in evidence.classes:
        base, other = values[(evidence.baseline, cls)], values[(challenger, cls)]
        effects[cls] = stats.relative_effect(base, other, CONFIDENCE) if base and other else None
    return _decide(evidence, hypothesis, effects, guards, caveats, summary_only=False)


# --- compact samples beside the record --------------------------------------------------


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
        lines += [json.dumps({"kind": "window", "variant": variant, **w}) for w in windows]
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
    try:
        lines = gzip.decompress(path.read_bytes()).decode().splitlines()
        header = json.loads(lines[0])
        evidence = Evidence(header["baseline"], header["variants"], header["classes"])
        for line in lines[1:]:
            entry = json.loads(line)
            kind = entry.pop("kind")
            if kind == "window":
                evidence.windows.setdefault(entry.pop("variant"), []).append(entry)
            else:
                evidence.samples.append(Sample.model_validate(entry))
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise InvalidInput([Problem(path, None, "", f"unreadable samples file: {exc}")]) from exc
    return evidence


# --- from a run folder --------------------------------------------------------------------


def evidence_of_run(run: RunFolder, spec: ExperimentSpec) -> Evidence:
    from kbgen.bench import driver as bench

    summary = bench.summarize(spec, run)
    order = [spec.baseline, *(v for v in spec.variants if v != spec.baseline)]
    return Evidence(
        baseline=spec.baseline,
        variants=order,
        classes=list(spec.workload.classes),
        samples=run.samples(),
        windows={v: summary["variants"][v]["windows"] for v in order if v in summary["variants"]},
    )


def comparability(meta: dict[str, Any], order: list[str]) -> list[str]:
    """Differences between variants that make a comparison unfair."""
    problems = []
    for key, what in (("engine_version", "engine version"), ("model", "model")):
        seen = {v: meta["variants"][v].get(key) for v in order if v in meta["variants"]}
        if len(set(seen.values())) > 1:
            problems.append(f"{what} differs: " + ", ".join(f"{v}={x}" for v, x in seen.items()))
    return problems


def from_run(
    run: RunFolder,
    record_id: str,
    allow_mismatch: bool = False,
    hypothesis: Hypothesis | None = None,
) -> tuple[dict[str, Any], Evidence]:
    """The record data and its evidence for a complete run folder."""
    meta = run.meta()
    if meta.get("status") != "complete":
        raise UsageError(
            f"{run.path}: the run is {meta.get('status')!r}, not complete; finish it first with "
            f"kbgen bench --resume {run.path}"
        )
    spec = load_spec(run.spec_path)
    order = [spec.baseline, *(v for v in spec.variants if v != spec.baseline)]
    missing = [v for v in order if v not in meta["variants"]]
    if missing:
        raise UsageError(f"{run.path}: no measurements for variant(s) {', '.join(missing)}")
    differences = comparability(meta, order)
    if differences and not allow_mismatch:
        raise Mismatch(
            f"{run.path}: not comparable: {'; '.join(differences)} "
            "(use --allow-mismatch to compare anyway; the record will say so)"
        )
    caveats = [f"compared despite: {d} (--allow-mismatch)" for d in differences]
    hypothesis = hypothesis or spec.hypothesis
    if hypothesis != spec.hypothesis:
        caveats.append("the record's hypothesis differs from the spec's; the record's was used")
    evidence = evidence_of_run(run, spec)
    first = meta["variants"][spec.baseline]
    hardware = {
        k: v
        for k, v in (meta.get("hardware") or {}).items()
        if k in ("cpu", "cpu_count", "accelerator", "count", "host")
    }
    server_args = getattr(spec.server, "args", [])
    data: dict[str, Any] = {
        "status": "concluded",
        "concluded": dt.date.today(),
        "hypothesis": hypothesis.model_dump(),
        "config": {
            "engine": {"name": "vllm", "version": first.get("engine_version")},
            "model": {"name": first.get("model")},
            "hardware": hardware,
            "server_args": redact.args(list(server_args)),
            "baseline": spec.baseline,
            "variants": {
                name: {
                    **v.model_dump(exclude_none=True, exclude_defaults=True),
                    **({"args": redact.args(v.args)} if v.args else {}),
                }
                for name, v in spec.variants.items()
            },
        },
        "workload": {
            "prompt_suite": spec.workload.prompts,
            "classes": list(spec.workload.classes),
            "max_tokens": spec.workload.max_tokens,
            "temperature": spec.workload.temperature,
            "ignore_eos": spec.workload.ignore_eos,
            "seed": spec.workload.seed,
            "warmup": spec.workload.warmup,
            "repeats": spec.workload.repeats,
            "concurrency": spec.workload.concurrency,
            "api": spec.workload.api,
        },
        "measurements": measurements(evidence),
        "spec_decode": spec_decode(evidence),
        "verdict": judge(evidence, hypothesis, caveats),
        "resolves": list(spec.resolves),
        "tags": list(spec.tags),
        "provenance": {
            "source": "measured",
            "tool": f"kbgen {__version__}",
            "git_sha": meta.get("git_sha"),
            "host": hardware.get("host"),
            "recorded_at": dt.datetime.now(dt.UTC).replace(microsecond=0),
            "run": run.path.name,
        },
        "raw_samples": {"path": f"{record_id}.samples.jsonl.gz"},
    }
    return data, evidence


# --- from other tools' result files ----------------------------------------------------------


def from_imports(
    found: list[imports.Imported],
    record_id: str,
    hypothesis: Hypothesis,
    allow_mismatch: bool = False,
    allow_summary_only: bool = False,
) -> tuple[dict[str, Any], Evidence | None]:
    """Record data from imported results, one per variant, the first being the baseline."""
    if len(found) < 2:
        raise UsageError("an import needs at least two variants: BASELINE=FILE VARIANT=FILE")
    differences = []
    for key, what in (("model", "model"),):
        seen = {i.variant: getattr(i, key) for i in found}
        if len(set(seen.values())) > 1:
            differences.append(f"{what} differs: " + ", ".join(f"{v}={x}" for v, x in seen.items()))
    for name in sorted({k for i in found for k in i.workload}):
        seen = {i.variant: i.workload.get(name) for i in found}
        if len(set(map(str, seen.values()))) > 1:
            differences.append(
                f"workload {name} differs: " + ", ".join(f"{v}={x}" for v, x in seen.items())
            )
    if differences and not allow_mismatch:
        raise Mismatch(
            f"not comparable: {'; '.join(differences)} (use --allow-mismatch to "
            "compare anyway; the record will say so)"
        )
    caveats = [f"compared despite: {d} (--allow-mismatch)" for d in differences]
    order = [i.variant for i in found]
    evidence = Evidence(
        order[0],
        order,
        [imports.ALL],
        [s for i in found for s in i.samples],
        {i.variant: [{"spec_decode": i.spec_decode}] for i in found if i.spec_decode},
    )
    with_samples = all(any(s.ok for s in i.samples) for i in found)
    if with_samples:
        summary_data = measurements(evidence)
        decided = judge(evidence, hypothesis, caveats)
    else:
        summary_data = {
            i.variant: {
                imports.ALL: {
                    m: {k: _round(v) if k != "n" else v for k, v in st.items()}
                    for m, st in i.summary.items()
                }
            }
            for i in found
        }
        decided = judge_summaries(evidence, summary_data, hypothesis, caveats, allow_summary_only)
    tools = sorted({i.tool for i in found})
    data: dict[str, Any] = {
        "status": "concluded",
        "concluded": dt.date.today(),
        "hypothesis": hypothesis.model_dump(),
        "config": {
            "engine": {"name": "vllm" if tools == ["vllm bench serve"] else "unknown"},
            "model": {"name": found[0].model or "unknown"},
            "hardware": {},
            "baseline": order[0],
            "variants": {name: {} for name in order},
        },
        "workload": {"prompt_suite": f"imported from {', '.join(tools)}", "classes": [imports.ALL]},
        "measurements": summary_data,
        "spec_decode": spec_decode(evidence),
        "verdict": decided,
        "provenance": {
            "source": "imported",
            "tool": f"kbgen {__version__}",
            "reference": ", ".join(tools),
            "recorded_at": dt.datetime.now(dt.UTC).replace(microsecond=0),
            "notes": [n for i in found for n in i.notes],
        },
        "resolves": [],
        "tags": [],
    }
    if with_samples:
        data["raw_samples"] = {"path": f"{record_id}.samples.jsonl.gz"}
        return data, evidence
    return data, None


def record_import(
    tool: str,
    pairs: list[str],
    records: Path,
    into: Path | None,
    spec_path: Path | None,
    allow_mismatch: bool = False,
    allow_summary_only: bool = False,
) -> Path:
    """Import NAME=FILE result files of `tool` into a planned record or a new one."""
    importer = imports.IMPORTERS[tool]
    found = []
    for pair in pairs:
        name, sep, file = pair.partition("=")
        if not sep or not name or not file:
            raise UsageError(f"{pair!r}: write each result file as VARIANT=FILE")
        found.append(importer(Path(file), name))
    if into is not None:
        planned = kb.load_model(into, Record)
        if planned.hypothesis is None:
            raise UsageError(f"{into}: has no hypothesis to decide")
        data, evidence = from_imports(
            found, into.stem, planned.hypothesis, allow_mismatch, allow_summary_only
        )
        return write(into, data, evidence, planned.title)
    if spec_path is None:
        raise UsageError("an import needs a hypothesis: --into a planned record, or --spec")
    spec = load_spec(spec_path)
    path = _free_path(records, f"{dt.date.today().isoformat()}-{spec.id}")
    data, evidence = from_imports(
        found, path.stem, spec.hypothesis, allow_mismatch, allow_summary_only
    )
    data["resolves"], data["tags"] = list(spec.resolves), list(spec.tags)
    return write(path, data, evidence, spec.title)


def _free_path(records: Path, record_id: str) -> Path:
    path = records / f"{record_id}.yaml"
    suffix = 1
    while path.exists():
        suffix += 1
        path = records / f"{record_id}-{suffix}.yaml"
    return path


# --- writing ------------------------------------------------------------------------------

GENERATED = (
    "status",
    "concluded",
    "config",
    "workload",
    "measurements",
    "spec_decode",
    "verdict",
    "provenance",
    "raw_samples",
)


def write(path: Path, data: dict[str, Any], evidence: Evidence | None, title: str) -> Path:
    """Write the samples file and the record: a new one, or fill in a planned one in place.

    Filling in keeps the author's comments, title, context, decision and rationale, and adds
    the spec's plan tasks and tags to the record's own.
    """
    content = samples_bytes(evidence) if evidence is not None else b""
    samples_path = path.parent / data["raw_samples"]["path"] if evidence is not None else None
    if evidence is not None:
        data["raw_samples"]["sha256"] = hashlib.sha256(content).hexdigest()
    if path.exists():
        doc = store.load_document(path)
        existing = store.plain(doc.data)
        if existing.get("status") not in ("planned", "running"):
            raise UsageError(
                f"{path}: is {existing.get('status')!r}; only a planned or running "
                "record is filled in (start a new one with kbgen new)"
            )
        rationale = (existing.get("verdict") or {}).get("rationale")
        if rationale:
            data["verdict"]["rationale"] = rationale
        updates = {k: data[k] for k in GENERATED if k in data}
        updates["resolves"] = list(
            dict.fromkeys([*existing.get("resolves", []), *data["resolves"]])
        )
        updates["tags"] = list(dict.fromkeys([*existing.get("tags", []), *data["tags"]]))
        for key in ("measurements", "spec_decode"):  # replaced whole, in place: no stale rows
            if key in doc.data:
                doc.data[key] = {}
        store.merge(doc.data, updates)
        _validate(path, store.plain(doc.data))
        if samples_path is not None:
            files.write_atomic(samples_path, content)
        store.save(doc)
        return path
    record = {
        "schema_version": 1,
        "id": path.stem,
        "title": title,
        "created": dt.date.today(),
        **data,
    }
    order = [
        "schema_version",
        "id",
        "title",
        "status",
        "created",
        "concluded",
        "hypothesis",
        "config",
        "workload",
        "measurements",
        "spec_decode",
        "verdict",
        "resolves",
        "tags",
        "provenance",
        "raw_samples",
    ]
    record = {k: record[k] for k in order if k in record}
    _validate(path, record)
    if samples_path is not None:
        files.write_atomic(samples_path, content)
    store.save(store.new_document(path, record))
    return path


def _validate(path: Path, data: dict[str, Any]) -> None:
    from pydantic import ValidationError

    try:
        Record.model_validate(data)
    except ValidationError as exc:  # a bug in kbgen, not the user's: say so plainly
        problems = [
            Problem(path, None, ".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors()
        ]
        raise InvalidInput(problems) from exc


# --- checking ----------------------------------------------------------------------------


def check(path: Path) -> list[Problem]:
    """Recompute a record's numbers from its samples file; one problem per number that differs."""
    record = kb.load_model(path, Record)
    tree = store.load_document(path).data

    def problem(loc: list[str | int], message: str) -> Problem:
        line, found = store.line_of(tree, loc)
        return Problem(path, line, kb.dotted(found), message)

    if (
        record.raw_samples is None
        and record.verdict is not None
        and (record.verdict.method in ("reported", "summary"))
    ):
        return []  # figures taken as reported or imported as summaries: nothing to recompute
    if record.raw_samples is None or record.hypothesis is None:
        return [problem(["raw_samples"], "no samples to recompute the numbers from")]
    samples_path = path.parent / record.raw_samples.path
    if not samples_path.exists():
        return [problem(["raw_samples", "path"], f"{samples_path} is missing")]
    digest = hashlib.sha256(samples_path.read_bytes()).hexdigest()
    if record.raw_samples.sha256 and digest != record.raw_samples.sha256:
        return [problem(["raw_samples", "sha256"], f"{samples_path.name} does not match it")]
    evidence = read_samples(samples_path)
    recomputed = judge(evidence, record.hypothesis, [])
    expected = {
        "measurements": measurements(evidence),
        "spec_decode": spec_decode(evidence),
        "verdict": {"outcome": recomputed["outcome"], "per_class": recomputed["per_class"]},
    }
    actual = record.model_dump(mode="json", exclude_none=True)
    actual["verdict"] = {
        k: v for k, v in (actual.get("verdict") or {}).items() if k in ("outcome", "per_class")
    }
    problems: list[Problem] = []
    for section, wanted in expected.items():
        for loc, message in _differences([section], wanted, actual.get(section, {})):
            problems.append(problem(loc, message))
    return problems


def _differences(
    loc: list[str | int], expected: Any, actual: Any
) -> list[tuple[list[str | int], str]]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            d
            for key in sorted(set(expected) | set(actual))
            for d in _differences([*loc, key], expected.get(key), actual.get(key))
        ]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in _differences([*loc, i], e, a)
        ]
    if expected == actual or _close(expected, actual):
        return []
    return [(loc, f"is {actual!r}, but its samples give {expected!r}")]


def _close(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return isinstance(a, numbers) and isinstance(b, numbers) and math.isclose(a, b, rel_tol=1e-9)


# --- the command's entry ------------------------------------------------------------------


def record_run(
    run_path: Path, records: Path, into: Path | None = None, allow_mismatch: bool = False
) -> Path:
    """Turn a run folder into a record: fill `into` (a planned record) or write a new one."""
    run = RunFolder.open(run_path)
    spec = load_spec(run.spec_path)
    if into is not None:
        planned = kb.load_model(into, Record)
        if planned.status not in (Status.PLANNED, Status.RUNNING):
            raise UsageError(
                f"{into}: is {planned.status!r}; only a planned or running record is filled in"
            )
        data, evidence = from_run(run, into.stem, allow_mismatch, planned.hypothesis)
        return write(into, data, evidence, planned.title)
    path = _free_path(records, f"{dt.date.today().isoformat()}-{spec.id}")
    data, evidence = from_run(run, path.stem, allow_mismatch)
    return write(path, data, evidence, spec.title)
