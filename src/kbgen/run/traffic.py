"""Requests of drawn lengths or a replayed trace: their times, lengths, prefix blocks and texts.

Pure but for reading the trace. A text is built from words whose token counts the served model's
tokenizer gave (`bench.bodies.word_tokens`), so its length is exact; a block's words are drawn
from its id alone, so requests with equal block ids share text as they shared a prefix cache.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import math
import random
from dataclasses import dataclass, replace
from pathlib import Path

from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files
from kbgen.kb.models import Lengths, Synthetic, Trace
from kbgen.kb.numbers import MAX_TOKENS
from kbgen.run import arrivals, prompts
from kbgen.run.design import Key
from kbgen.run.models import Traffic
from kbgen.run.prefixes import WORDS
from kbgen.run.spec import ExperimentSpec, WorkloadSpec

MAX_BYTES = 256 * files.MIB  # Mooncake's conversation trace is 3 MB, Azure's a year 1 GB
MAX_NUMBER = 1e12  # a timestamp in ms (30 years) or a length past any model's context


@dataclass(frozen=True)
class Request:
    """One request: when it is due (seconds into the slice; None: drawn lengths), its prompt's
    and output's tokens, and the prefix blocks its prompt begins with."""

    offset_s: float | None
    input_tokens: int
    output_tokens: int
    blocks: tuple[int, ...] = ()


def of(workload: WorkloadSpec, folder: Path) -> list[Request] | None:
    """The workload's synthetic or trace requests (a trace's path read from `folder`); None
    for a prompt suite."""
    if workload.synthetic is not None:
        return synthetic(workload.synthetic)
    if workload.trace is not None:
        return read(folder / workload.trace.path, workload.trace)
    return None


def suite(spec: ExperimentSpec) -> dict[str, list[str]]:
    """The spec's prompts by class: its suite's, or as many empty texts as its synthetic or
    trace requests (built on the first server); InvalidInput names file, line and field."""
    w = spec.workload
    requests = of(w, spec.folder)
    scaled = w.request_rate is not None or any("request_rate" in load for load in spec.loads)
    if w.trace is not None and scaled and requests is not None and own_rate(requests) is None:
        message = "one request, or all at one time: no gaps to scale to a request_rate"
        raise InvalidInput([Problem(spec.folder / w.trace.path, None, "", message)])
    if requests is not None:
        return {w.source: [""] * len(requests)}
    return prompts.load(spec.path(w.prompts or ""), w.classes, w.per_class)


def due(
    workload: WorkloadSpec,
    requests: list[Request] | None,
    sent: list[tuple[int, int]],
    *stream: int,
) -> list[float] | None:
    """When each of a window's requests (`sent`: its index and repeat) is due, in seconds from
    the window's start: a trace's times, each repeat after the one before as the trace did;
    or drawn at the request rate for `stream` (`run.arrivals`). None: a closed loop."""
    if workload.trace is not None and requests is not None:
        times = offsets(requests, workload.trace, workload.request_rate)
        lap = times[-1] * len(times) / max(len(times) - 1, 1)  # the span and one mean gap
        found = [times[index] + repeat * lap for index, repeat in sent]
        return [t - min(found) for t in found]
    if workload.request_rate is None:
        return None
    return arrivals.offsets(workload.arrivals, workload.request_rate, len(sent), *stream)


def sessions(sent: list[tuple[str, int, int]], turns: int) -> list[list[int]]:
    """A window's requests (`sent`: each one's class, index and repeat, in sending order) as
    sessions: the positions of each session's turns in turn order, the sessions in the order
    their first turn comes. A class's prompts are its sessions' turns, `turns` at a time."""
    found: dict[tuple[str, int, int], list[int]] = {}
    for position, (cls, index, repeat) in enumerate(sent):
        found.setdefault((cls, index // turns, repeat), []).append(position)
    return [sorted(positions, key=lambda p: sent[p][1]) for positions in found.values()]


def whole_sessions(todo: list[Key], turns: int, suite: dict[str, list[str]]) -> list[Key]:
    """`todo` with every turn of each session it holds a turn of, in turn order: a session
    cut short is sent again from its first turn (a sample sent again supersedes the first)."""
    out: dict[Key, None] = {}
    for key in todo:
        first = key.prompt_index - key.prompt_index % turns
        for index in range(first, min(first + turns, len(suite[key.prompt_class]))):
            out[replace(key, prompt_index=index)] = None
    return list(out)


def session_groups(suite: dict[str, list[str]], turns: int) -> dict[str, list[str | None]]:
    """Each prompt's session, by class: the verdict's unit."""
    return {cls: [f"session {i // turns + 1}" for i in range(len(p))] for cls, p in suite.items()}


def synthetic(design: Synthetic) -> list[Request]:
    """`design.count` requests of drawn lengths, the same for the same seed."""
    draw = random.Random(f"lengths:{design.seed}")
    return [
        Request(None, length(design.input_tokens, draw), length(design.output_tokens, draw))
        for _ in range(design.count)
    ]


def length(lengths: Lengths, draw: random.Random) -> int:
    """One length of `lengths`, rounded and clipped to its bounds."""
    top = lengths.max if lengths.max is not None else math.inf
    match lengths.distribution:
        case "fixed":
            return lengths.mean
        case "uniform":
            return draw.randint(lengths.min, int(top))
        case "normal":
            value = draw.gauss(lengths.mean, lengths.stdev)
        case "lognormal":  # of that mean and spread: sigma^2 = ln(1 + (s/m)^2)
            sigma2 = math.log1p((lengths.stdev / lengths.mean) ** 2)
            value = draw.lognormvariate(math.log(lengths.mean) - sigma2 / 2, math.sqrt(sigma2))
    return int(min(max(round(value), lengths.min), top))


def read(path: Path, trace: Trace) -> list[Request]:
    """The trace's slice: its requests with their offsets from the slice's first, cut to the
    trace's bounds; InvalidInput names the file, line and field of what is not a request."""
    if not path.exists() and not path.is_symlink():
        raise InvalidInput([Problem(path, None, "", "no such trace file")])
    raw = files.read_regular(path, MAX_BYTES)
    kind = trace.format or ("azure" if path.suffix.lower() == ".csv" else "mooncake")
    rows = _azure(path, raw) if kind == "azure" else _mooncake(path, raw)
    problems = [
        Problem(path, line, "timestamp", "goes back in time: a trace is in the order it arrived")
        for (_, before), (line, after) in itertools.pairwise(rows)
        if after.offset_s is not None
        and before.offset_s is not None
        and after.offset_s < before.offset_s
    ]
    if problems:
        raise InvalidInput(problems[:1])
    found = _slice([r for _, r in rows], trace)
    if not found:
        raise InvalidInput([Problem(path, None, "", "no request in the trace's slice")])
    return found


def _slice(rows: list[Request], trace: Trace) -> list[Request]:
    first = (rows[0].offset_s or 0.0) if rows else 0.0
    start = first + trace.start_s
    end = math.inf if trace.duration_s is None else start + trace.duration_s
    kept = [r for r in rows if start <= (r.offset_s or 0.0) < end][: trace.limit]
    begin = (kept[0].offset_s or 0.0) if kept else 0.0
    top_in, top_out = trace.max_input_tokens or math.inf, trace.max_output_tokens or math.inf
    return [
        Request(
            (r.offset_s or 0.0) - begin,
            int(min(r.input_tokens, top_in)),
            int(min(r.output_tokens, top_out)),
            r.blocks,
        )
        for r in kept
    ]


def _mooncake(path: Path, raw: bytes) -> list[tuple[int, Request]]:
    rows = []
    lines, problems = files.json_lines(path, raw)
    for number, entry in lines:
        if not isinstance(entry, dict):
            problems.append(Problem(path, number, "", "each line is one request's object"))
            continue
        fields = {
            "timestamp": _number(entry.get("timestamp"), 0),
            "input_length": _tokens(entry.get("input_length")),
            "output_length": _tokens(entry.get("output_length")),
        }
        blocks = entry.get("hash_ids", [])
        bad = [name for name, value in fields.items() if value is None]
        if not isinstance(blocks, list) or not all(_is_int(b) for b in blocks):
            bad.append("hash_ids")
        if bad:
            what = "a list of block ids" if bad[0] == "hash_ids" else "a number, at least 0"
            if bad[0] in ("input_length", "output_length"):
                what = f"a whole number of tokens, 1 to {MAX_TOKENS:,}"
            problems.append(Problem(path, number, bad[0], f"needs {what}"))
            continue
        ms, tokens_in, tokens_out = fields.values()
        assert ms is not None and tokens_in is not None and tokens_out is not None
        rows.append((number, Request(ms / 1000, int(tokens_in), int(tokens_out), tuple(blocks))))
    if problems:
        raise InvalidInput(problems)
    return rows


def _azure(path: Path, raw: bytes) -> list[tuple[int, Request]]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        message = f"not UTF-8 text (byte 0x{raw[exc.start]:02x})"
        raise InvalidInput([Problem(path, line, "", message)]) from exc
    reader = csv.DictReader(io.StringIO(text))
    want = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    missing = [name for name in want if name not in (reader.fieldnames or [])]
    if missing:
        message = f"needs the columns {', '.join(want)}"
        raise InvalidInput([Problem(path, 1, missing[0], message)])
    try:
        return _azure_rows(path, reader, want)
    except csv.Error as exc:
        raise InvalidInput([Problem(path, reader.line_num + 1, "", f"not CSV: {exc}")]) from exc


def _azure_rows(
    path: Path, reader: csv.DictReader[str], want: tuple[str, ...]
) -> list[tuple[int, Request]]:
    rows, problems, first = [], [], None
    for row in reader:
        number = reader.line_num
        try:
            when = dt.datetime.fromisoformat(row["TIMESTAMP"].strip())
            if first is not None and (when.tzinfo is None) != (first.tzinfo is None):
                raise ValueError("a time zone on some rows only")
        except (ValueError, AttributeError):
            problems.append(Problem(path, number, "TIMESTAMP", "needs a date and time"))
            continue
        counts = [_tokens(_int_text(row.get(name))) for name in want[1:]]
        if counts[0] is None or counts[1] is None:
            name = want[1] if counts[0] is None else want[2]
            message = f"needs a whole number of tokens, 1 to {MAX_TOKENS:,}"
            problems.append(Problem(path, number, name, message))
            continue
        first = first or when
        offset = (when - first).total_seconds()
        rows.append((number, Request(offset, int(counts[0]), int(counts[1]))))
    if problems:
        raise InvalidInput(problems)
    return rows


def _tokens(value: object) -> float | None:
    """`value` as a whole number of tokens, 1 to MAX_TOKENS (None: not one)."""
    found = _number(value, 1, whole=True)
    return found if found is not None and found <= MAX_TOKENS else None


def _int_text(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object, least: float, whole: bool = False) -> float | None:
    """`value` as a number of at least `least` and at most MAX_NUMBER (None: not one)."""
    ok = _is_int(value) or (not whole and isinstance(value, float) and math.isfinite(value))
    if not ok or not least <= value <= MAX_NUMBER:  # type: ignore[operator]
        return None
    return float(value)  # type: ignore[arg-type]


def own_rate(requests: list[Request]) -> float | None:
    """The rate the slice arrived at: its requests after the first over its span (None: no span)."""
    span = (requests[-1].offset_s or 0.0) - (requests[0].offset_s or 0.0) if requests else 0.0
    return (len(requests) - 1) / span if span > 0 else None


def offsets(requests: list[Request], trace: Trace, rate: float | None) -> list[float]:
    """When each request of the slice is due, in seconds from the window's start: its own times
    `trace.speedup` faster, or scaled so that the slice arrives at `rate`."""
    own = own_rate(requests)
    factor = trace.speedup if rate is None or own is None else rate / own
    return [(r.offset_s or 0.0) / factor for r in requests]


def texts_of(workload: WorkloadSpec, requests: list[Request], built: Traffic) -> list[str]:
    """The workload's synthetic or trace prompts (`texts` with its blocks and seed)."""
    if workload.trace is not None:
        return texts(requests, built, workload.trace.block_tokens, workload.trace.seed)
    return texts(requests, built, 1, workload.synthetic.seed if workload.synthetic else 0)


def texts(requests: list[Request], built: Traffic, block_tokens: int, seed: int) -> list[str]:
    """Each request's prompt of its input tokens, but the tokens a request adds: its blocks'
    words, then its own."""
    words = sorted((w, n) for w, n in built.word_tokens.items() if n >= 1)
    ones = [w for w, n in words if n == 1]
    if not ones:
        raise ValueError("no word of one token to fill a prompt to its length")
    short = [replace(r, input_tokens=max(r.input_tokens - built.added_tokens, 1)) for r in requests]
    return ["".join(_prompt(r, i, words, ones, block_tokens, seed)) for i, r in enumerate(short)]


def _prompt(
    request: Request,
    index: int,
    words: list[tuple[str, int]],
    ones: list[str],
    block_tokens: int,
    seed: int,
) -> list[str]:
    out: list[str] = []
    left = request.input_tokens
    for block in request.blocks:
        if left <= 0:
            break
        take = min(block_tokens, left)
        out += _words(random.Random(f"block:{seed}:{block}"), take, words, ones)
        left -= take
    if left > 0:
        out += _words(random.Random(f"own:{seed}:{index}"), left, words, ones)
    return out


def _words(
    draw: random.Random, tokens: int, words: list[tuple[str, int]], ones: list[str]
) -> list[str]:
    """Words of `tokens` tokens in all, drawn in turn; the first words of a longer draw, so a
    block cut short reads as the start of the whole block."""
    out: list[str] = []
    left = tokens
    while left > 0:
        word, count = words[draw.randrange(len(words))]
        if count > left:
            word, count = ones[draw.randrange(len(ones))], 1
        out.append(word)
        left -= count
    return out


def word_list() -> list[str]:
    """The words prompts are built from, each with the space before it (one pre-token each)."""
    return [f" {w}" for w in WORDS]
