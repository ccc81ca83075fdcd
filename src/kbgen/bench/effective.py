"""What a vLLM server ran with, read from its log: arguments, engine config, choices, warnings.

Pure: log lines in, `EffectiveSettings` out; a line that does not parse is skipped, never an
error. The lines read, with vLLM's source locations: docs/design.md, "What the server said".
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbgen.bench import logline
from kbgen.bench.logline import Line
from kbgen.kb.models import EffectiveSettings
from kbgen.run.folder import RunFolder

NON_DEFAULT = "non-default args: "
_CONFIG = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: (?P<config>.*)$")
_KEY = re.compile(r"[A-Za-z_]\w*=")
_PLAIN = re.compile(r"[^()\[\]{}<>]*")  # a value with nothing nested in it
_KEPT_NESTED = ("speculative_config",)
# they name the server (its model, paths, address), not how it runs: left out
_IDENTITY = frozenset(
    {"model_tag", "model", "tokenizer", "served_model_name", "download_dir", "host", "port"}
)
_COMPILATION = re.compile(  # an enum's repr may hold a comma: <CUDAGraphMode.FULL: (2, 1)>
    r"""['"](?P<key>mode|cudagraph_mode)['"]: (?P<value><[^>]*>|[^,}]+)"""
)
_ENUM = re.compile(r"<(?P<name>[\w.]+): [^>]*>")  # <CUDAGraphMode.NONE: 0>
_OPENS, _CLOSES = "([{<", ")]}>"

# (pattern, setting, its value: None for the pattern's first group)
_BEHAVIOUR: list[tuple[re.Pattern[str], str, str | None]] = [
    (re.compile(r"^Asynchronous scheduling is (enabled|disabled)\."), "async_scheduling", None),
    (
        re.compile(r"^Async(?:hronous)? scheduling\b.*\b(?:will be|is) disabled", re.I),
        "async_scheduling",
        "disabled",
    ),
    (re.compile(r"^Using V2 Model Runner"), "model_runner", "V2"),
    (re.compile(r"using the V1 model runner instead", re.I), "model_runner", "V1"),
]
# a start-up phase's figures: (pattern, {group: phase}); the weights of a model that follows
# "Loading drafter model..." are the draft's, and so is that process's second torch.compile
_STARTUP: list[tuple[re.Pattern[str], dict[str, str]]] = [
    (re.compile(r"^Loading weights took (?P<s>[\d.]+) seconds"), {"s": "weights_s"}),
    (
        re.compile(r"^Model loading took (?P<gib>[\d.]+) GiB(?: memory)? and (?P<s>[\d.]+) sec"),
        {"gib": "model_memory_gib", "s": "model_load_s"},
    ),
    (re.compile(r"^torch\.compile took (?P<s>[\d.]+) s in total"), {"s": "compile_s"}),
    (
        re.compile(r"^Graph capturing finished in (?P<s>[\d.]+) secs?, took (?P<gib>[\d.]+) GiB"),
        {"s": "graph_capture_s", "gib": "graph_memory_gib"},
    ),
    (re.compile(r"^Available KV cache memory: (?P<gib>[\d.]+) GiB"), {"gib": "kv_cache_gib"}),
    (re.compile(r"^Auto set \((?P<gib>[\d.]+)/[\d.]+\) GiB for KV cache"), {"gib": "kv_cache_gib"}),
    (re.compile(r"^init engine \(.*\) took (?P<s>[\d.]+) s"), {"s": "engine_init_s"}),
]
_DRAFTER = "Loading drafter model"
# a phase that is the draft's where its process loaded a draft model's weights: the weights next
# after "Loading drafter model...", and the second torch.compile (EAGLE-3's head, after the
# target's backbone)
_DRAFT = {"weights_s": "draft_weights_s", "compile_s": "draft_compile_s"}


@dataclass
class _Processes:
    """What the processes of one launch have logged so far, each by its source (every worker
    logs its own phases)."""

    drafting: set[str] = field(default_factory=set)  # its next weights are a draft model's
    drafted: set[str] = field(default_factory=set)  # it loaded a draft's weights
    compiled: set[str] = field(default_factory=set)  # it logged a torch.compile


_CHANGES = re.compile(
    r"not (?:yet )?supported|does not (?:yet )?support|not compatible|\bdisabl(?:e|ed|es|ing)\b"
    r"|fall(?:s|ing)? ?back|fallback|\binstead\b|\bignored\b|\boverrid(?:e|es|den|ing)\b",
    re.I,
)


def of_folder(folder: RunFolder, variant: str) -> EffectiveSettings | None:
    """What a variant's server said it ran with, from its log in the run folder."""
    text = folder.read_log(variant)
    return None if text is None else of_lines(logline.lines(text))


def of_lines(lines: Iterable[Line]) -> EffectiveSettings | None:
    """The settings these lines (one variant's log) show; None when they show none (a server
    that is not vLLM, or one kbgen did not start)."""
    args: dict[str, Any] = {}
    config: dict[str, str] = {}
    behaviour: dict[str, str] = {}
    warnings: list[str] = []
    before: dict[str, float] = {}  # phases logged before any launch line: a log not kbgen's
    startup: list[dict[str, float]] = []  # each launch's, empty where it logged none
    processes = _Processes()
    for line in lines:
        message = line.message.strip()
        if line.launch:
            startup.append({})
            processes = _Processes()
        _phase(message, line.source, startup[-1] if startup else before, processes)
        if message.startswith(NON_DEFAULT):
            args.update(_args(message[len(NON_DEFAULT) :]))
        elif found := _CONFIG.search(message):
            config.update(_config(found.group("config")))
        for pattern, setting, value in _BEHAVIOUR:
            if matched := pattern.search(message):
                behaviour[setting] = value or matched.group(1)
                break
        if line.level == "WARNING" and _CHANGES.search(message) and message not in warnings:
            warnings.append(message)
    for name in _IDENTITY:
        args.pop(name, None)
        config.pop(name, None)
    startup = [before, *startup] if before else startup
    if not (args or config or behaviour or warnings or any(startup)):
        return None
    return EffectiveSettings(
        args=args, config=config, behaviour=behaviour, startup=startup, warnings=warnings
    )


def _phase(message: str, source: str, phases: dict[str, float], processes: _Processes) -> None:
    """Add the start-up figure `message` (written by process `source`) gives, if any, to its
    launch's `phases`: the first of each (every worker may log one). A process's weights after
    its "Loading drafter model..." are a draft model's (n-gram says it too, and loads none), and
    so is the second torch.compile of a process that loaded them (EAGLE-3's head, after the
    target's backbone)."""
    if message.startswith(_DRAFTER):
        processes.drafting.add(source)
        return
    for pattern, names in _STARTUP:
        if found := pattern.search(message):
            for group, name in names.items():
                phases.setdefault(
                    _draft_or_target(name, source, processes), float(found.group(group))
                )
            return


def _draft_or_target(phase: str, source: str, processes: _Processes) -> str:
    """`phase` as the draft's (`_DRAFT`) where process `source` logged it for a draft model; note
    what it tells of the process."""
    draft = False
    if phase == "weights_s" and source in processes.drafting:
        processes.drafting.discard(source)
        processes.drafted.add(source)
        draft = True
    elif phase == "compile_s":
        draft = source in processes.compiled and source in processes.drafted
        processes.compiled.add(source)
    return _DRAFT[phase] if draft else phase


def explains_behaviour(warning: str) -> str | None:
    """The `behaviour` setting a warning sets, if it sets one."""
    for pattern, setting, _ in _BEHAVIOUR:
        if pattern.search(warning):
            return setting
    return None


def _split(text: str, separator: re.Pattern[str]) -> list[str]:
    """`text` cut at each top-level `, ` followed by `separator` (not inside brackets or
    quotes)."""
    pieces, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in _OPENS:
            depth += 1
        elif char in _CLOSES:
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(", ", i) and separator.match(text, i + 2):
            pieces.append(text[start:i])
            start = i + 2
            i += 1
        i += 1
    pieces.append(text[start:])
    return pieces


def _config(text: str) -> dict[str, str]:
    """The engine config's pairs that matter: plain values, the speculative config, and the
    compilation config's mode and cudagraph_mode."""
    out: dict[str, str] = {}
    for piece in _split(text.strip(), _KEY):
        key, sep, value = piece.partition("=")
        if not sep or not key.isidentifier():
            continue
        if key == "compilation_config":
            for found in _COMPILATION.finditer(value):
                shown = _ENUM.sub(lambda m: m.group("name"), found.group("value").strip())
                out[f"compilation_config.{found.group('key')}"] = shown
        elif key in _KEPT_NESTED or _PLAIN.fullmatch(value):
            out[key] = value
    return out


_ARG_KEY = re.compile(r"""['"][^'"]*['"]: """)


def _args(text: str) -> dict[str, Any]:
    """The logged dict of non-default args; a value that is not a Python literal (an object's
    repr) kept as its text."""
    text = text.strip()
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        return {str(key): _plain(value) for key, value in parsed.items()}
    if not (text.startswith("{") and text.endswith("}")):
        return {}
    out: dict[str, Any] = {}
    for piece in _split(text[1:-1], _ARG_KEY):
        key, sep, value = piece.partition(": ")
        if not sep:
            continue
        try:
            name = ast.literal_eval(key)
            value_ = _plain(ast.literal_eval(value))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value_ = value
            name = key.strip("'\"")
        out[str(name)] = value_
    return out


def _plain(value: Any) -> Any:
    """A literal as a record can keep it: JSON's types (tuples and sets as lists; anything
    else as its text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)
