"""AIPerf's per-request export (`aiperf profile --export-level records`) as evidence.

An artifact folder holds `profile_export.jsonl` (a line per request), `profile_export_aiperf.json`
(the run's figures and its input config) and `inputs.json` (every request's body). Tokens are the
server's usage counts; which chunk held how many is not said, so no per-token ITL is claimed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from kbgen.errors import InvalidInput, Problem
from kbgen.kb.files import read_regular
from kbgen.kb.numbers import Count, Int, NonNegative
from kbgen.kb.problems import problems_of
from kbgen.record.importers.imported import Imported, headline, no_split, sample, token_counts
from kbgen.record.importers.reading import MAX_BYTES, MAX_REQUESTS, Format, read_format

RECORDS, SUMMARY, INPUTS = "profile_export.jsonl", "profile_export_aiperf.json", "inputs.json"
RATES = ("poisson", "constant", "gamma")  # AIPerf's phase types that send at a request rate
NOT_ARTIFACTS = "a folder, not an AIPerf artifact folder"
PROCESSES = ("poisson", "constant")  # those whose process kbgen's `arrivals` names alike
MAPPING = (
    "AIPerf's metrics as kbgen names them: time_to_first_token is ttft_ms, its "
    "inter_chunk_latency the gaps between stream chunks (chunk_gap_ms), request_latency e2e_ms; "
    "each request's scheduled time is when AIPerf issued its credit (credit_issued_ns), its send "
    "request_start_ns; tokens are the server's usage counts"
)


class _Meta(Format):
    conversation_id: str | None = None
    turn_index: Count = 0
    credit_issued_ns: Int
    request_start_ns: Int
    request_end_ns: Int
    benchmark_phase: str = "profiling"


class _Error(Format):
    code: Int | None = None
    message: str = ""


class _Record(Format):
    metadata: _Meta
    metrics: dict[str, Any] = Field(default_factory=dict)
    error: _Error | None = None

    def number(self, name: str) -> float | None:
        """A metric's value, where it is one finite number."""
        value = (self.metrics.get(name) or {}).get("value")
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        return float(value) if math.isfinite(value) else None

    def numbers(self, name: str) -> list[float]:
        """A metric's list of finite numbers (none: not such a list)."""
        values = (self.metrics.get(name) or {}).get("value")
        if not isinstance(values, list) or not all(isinstance(v, int | float) for v in values):
            return []
        return [float(v) for v in values]


class _Phase(Format):
    kind: str = "profiling"
    type: str | None = None
    rate: NonNegative | None = None
    concurrency: Count | None = None


class _Endpoint(Format):
    type: str | None = None
    streaming: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class _Config(Format):
    endpoint: _Endpoint = Field(default_factory=_Endpoint)
    phases: list[_Phase] = Field(default_factory=list)
    models: dict[str, Any] = Field(default_factory=dict)


class _Summary(Format):
    aiperf_version: str | None = None
    input_config: _Config = Field(default_factory=_Config)


def read(path: Path, variant: str) -> list[Imported]:
    """One variant's AIPerf run: its artifact folder, or the `profile_export.jsonl` in it."""
    folder, file = (path, path / RECORDS) if path.is_dir() else (path.parent, path)
    if path.is_dir() and not file.exists():
        raise InvalidInput([Problem(path, None, "", f"{NOT_ARTIFACTS} (no {RECORDS} in it)")])
    records = _records(file)
    summary = read_format(folder / SUMMARY, _Summary) if (folder / SUMMARY).is_file() else None
    config = summary.input_config if summary else _Config()
    items: list[dict[str, Any]] = config.models.get("items") or [{}]
    model = items[0].get("name")
    out = Imported(variant, "AIPerf", model, summary.aiperf_version if summary else None)
    out.source = file
    out.notes += [f"{variant}: imported from {folder.name}/{file.name} (AIPerf)", MAPPING]
    phase = next((p for p in config.phases if p.kind == "profiling"), _Phase())
    timed = phase.type in RATES and bool(phase.rate)
    bodies = _bodies(folder / INPUTS)
    texts: list[str | None] = []
    for i, record in enumerate(sorted(records, key=lambda r: r.metadata.credit_issued_ns)):
        meta = record.metadata
        ttft = record.number("time_to_first_token")
        error = record.error.message or f"HTTP {record.error.code}" if record.error else None
        tokens = record.number("usage_completion_tokens")
        done = sample(
            variant,
            i,
            None if ttft is None else ttft / 1000,
            [g / 1000 for g in record.numbers("inter_chunk_latency")],
            None if tokens is None else int(tokens),
            error,
        )
        done.chunk_tokens = []  # AIPerf does not say which chunk held how many tokens
        shift = meta.request_start_ns
        done.sent_ns, done.scheduled_ns = shift, meta.credit_issued_ns
        done.chunk_ns = [t + shift for t in done.chunk_ns]
        done.done_ns = meta.request_end_ns if done.ok else None
        done.on_schedule = True if timed else None
        prompt = record.number("usage_prompt_tokens")
        done.prompt_tokens = None if prompt is None else int(prompt)
        out.samples.append(done)
        texts.append(bodies.get(f"{meta.conversation_id}:{meta.turn_index}", {}).get("text"))
    out.prompt_texts = texts
    if None not in texts:
        out.prompt_keys, out.prompt_evidence = list(texts), "prompt text"
    out.in_order_sent = True
    out.said = _said(config, phase, timed, next(iter(bodies.values()), {}))
    out.workload = {"phase": json.dumps(phase.model_dump(), sort_keys=True)}
    ok = [s for s in out.samples if s.ok]
    if len(ok) < len(out.samples):
        out.notes.append(f"{variant}: {len(out.samples) - len(ok)} of {len(out.samples)} failed")
    for key, field in (("input_tokens", "prompt_tokens"), ("output_tokens", "output_tokens")):
        counts = [n for s in ok if (n := getattr(s, field)) is not None]
        if (found := token_counts(counts)) is not None:
            out.tokens[key] = found
    out.notes.append(f"{variant}: AIPerf's own figures: " + _figures(ok))
    out.notes += [no_split(variant), f"{variant}: no client/server token cross-check"]
    return [out]


def _records(path: Path) -> list[_Record]:
    """The profiling phase's requests of a `profile_export.jsonl`, each line validated."""
    text = read_regular(path, MAX_BYTES).decode("utf-8", errors="replace")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = _Record.model_validate(json.loads(line))
        except ValueError as exc:
            problems = (
                [Problem(path, number, p.field, p.message) for p in problems_of(path, exc)]
                if isinstance(exc, ValidationError)
                else [Problem(path, number, "", f"not a JSON line: {exc}")]
            )
            raise InvalidInput(problems) from exc
        if record.metadata.benchmark_phase == "profiling":
            out.append(record)
    if not out or len(out) > MAX_REQUESTS:
        raise InvalidInput(
            [Problem(path, None, "", f"{len(out)} profiling requests (1 to {MAX_REQUESTS})")]
        )
    return out


def _bodies(path: Path) -> dict[str, dict[str, Any]]:
    """Each request's body by `conversation:turn`, with its prompt text (none: no inputs.json)."""
    if not path.is_file():
        return {}
    data = json.loads(read_regular(path, MAX_BYTES))
    out = {}
    for session in data.get("data", []) if isinstance(data, dict) else []:
        for turn, body in enumerate(session.get("payloads", [])):
            messages = body.get("messages")
            text = json.dumps(messages) if messages is not None else body.get("prompt")
            out[f"{session.get('session_id')}:{turn}"] = {**body, "text": text}
    return out


def _said(config: _Config, phase: _Phase, timed: bool, body: dict[str, Any]) -> dict[str, Any]:
    """The workload's settings the run states: its schedule, endpoint and what it asked for."""
    said: dict[str, Any] = {"concurrency": phase.concurrency}
    said["request_rate"] = phase.rate if timed else "inf"
    if timed and phase.type in PROCESSES:
        said["arrivals"] = {"process": phase.type}
    kind = config.endpoint.type
    if kind in ("chat", "completions"):
        said["api"] = kind
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        said["usage"] = "continuous" if options.get("continuous_usage_stats") else "final"
    for key, name in (("max_completion_tokens", "max_tokens"), ("max_tokens", "max_tokens")):
        if isinstance(body.get(key), int):
            said[name] = body[key]
    for name in ("temperature", "ignore_eos"):
        if name in body:
            said[name] = body[name]
    return said


def _figures(ok: list[Any]) -> str:
    ends = [s.done_ns for s in ok if s.done_ns is not None]
    span = (max(ends) - min(s.sent_ns for s in ok)) / 1e9 if ends else None
    return headline(("request throughput", len(ends) / span if span else None, "req/s"))
