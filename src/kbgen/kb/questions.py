"""Which question a record answers: the key two records share when they test the same one.

The rule is data: `ASKED` holds one `Part` per thing two records must agree on, its words and
the value it reads; `question_of` hashes the values and `rule` writes the words (the design page's
statement of the rule is generated from it, so the two cannot drift).
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from kbgen.kb.models import (
    Config,
    Engine,
    Hardware,
    Hypothesis,
    Load,
    Model,
    ModelInfo,
    Record,
    Unknowable,
    Variant,
    Workload,
)

RULE = 6  # of `question_of`: cached cards, which keep its key and facets, are keyed by it

Facets = tuple[tuple[str, str], ...]  # (what, its value in words), as `question_of` gives them
SETTINGS = "settings"  # the facet of the common server arguments and `VLLM_*` variables
UNSET = "unset"


@dataclass(frozen=True)
class Asked:
    """What the parts of the rule read: a record with a configuration and a hypothesis, the
    variant judged against its baseline, and the load level it was judged at (a sweep's cell;
    empty: the workload's one load)."""

    record: Record
    config: Config
    hypothesis: Hypothesis
    variant: str
    load: Load


@dataclass(frozen=True)
class Part:
    """One thing two records must agree on to ask the same question: what the rule says of it
    and the value `question_of` hashes for it."""

    key: str  # its name in the hashed key: changing one changes every key (bump RULE)
    what: str  # what the rule calls it
    of: type[Model]  # the model whose fields it reads
    fields: tuple[str, ...]  # those fields, as the rule lists them
    note: str  # the rule's words beyond the fields: what it leaves out, and why (Markdown)
    value: Callable[[Asked], Any]  # JSON-able
    reads: tuple[Unknowable, ...] = ()  # the record's fields it reads that may be unknown


HYPOTHESIS = ("primary_metric", "direction", "minimum_effect")
MODEL = ("name", "quantization")
HARDWARE = tuple(name for name in Hardware.model_fields if name not in ("host", "devices"))
WORKLOAD = (
    "prompt_suite",
    "concurrency",
    "request_rate",
    "max_tokens",
    "temperature",
    "api",
    "ignore_eos",
)
NOT_ASKED = tuple(
    name
    for name in Workload.model_fields
    if name not in {*WORKLOAD, "arrivals", "prefixes", "sessions", "synthetic", "trace", "usage"}
)


def _measured(record: Record) -> bool:
    return record.provenance is not None and record.provenance.source == "measured"


def _usage(record: Record) -> str | None:
    """How a record's client asked for token counts; kbgen's runs from before the field was
    kept asked on every chunk."""
    usage = record.workload.usage if record.workload else None
    return usage or ("continuous" if _measured(record) else None)


def _request_rate(record: Record) -> float | str | None:
    """How fast a record's client started requests; `kbgen bench` starts each as soon as its
    concurrency lets it, and says no rate."""
    rate = record.workload.request_rate if record.workload else None
    return rate if rate is not None else ("inf" if _measured(record) else None)


def _vllm_env(config: Config) -> dict[str, str]:
    return {k: v for k, v in sorted(config.server_env.items()) if k.startswith("VLLM_")}


def _workload(asked: Asked) -> dict[str, Any] | None:
    workload = asked.record.workload
    if workload is None:
        return None
    asked_for = workload.model_dump(mode="json", include=set(WORKLOAD)) | asked.load
    asked_for |= {"request_rate": _request_rate(asked.record), "usage": _usage(asked.record)}
    if workload.arrivals is not None:  # an open loop's traffic: its process, not its seed
        asked_for["arrivals"] = workload.arrivals.model_dump(mode="json", exclude={"seed"})
    if workload.prefixes is not None:  # how much the cache can hold: the count and length
        asked_for["prefixes"] = workload.prefixes.model_dump(mode="json", exclude={"seed"})
    if workload.sessions is not None:  # the turns a session and the think time
        asked_for["sessions"] = workload.sessions.model_dump(mode="json")
    if workload.synthetic is not None:  # the lengths' distributions, not the draw
        asked_for["synthetic"] = workload.synthetic.model_dump(mode="json", exclude={"seed"})
    if workload.trace is not None:  # the slice and its speed (the file: `prompt_suite`)
        exclude = {"seed", "path", "format"}
        asked_for["trace"] = workload.trace.model_dump(mode="json", exclude=exclude)
    return asked_for


ASKED: tuple[Part, ...] = (
    Part(
        "hypothesis",
        "the hypothesis",
        Hypothesis,
        HYPOTHESIS,
        "what is claimed, not how it is worded",
        lambda a: a.hypothesis.model_dump(mode="json", include=set(HYPOTHESIS)),
    ),
    Part(
        "engine",
        "the engine",
        Engine,
        ("name",),
        "not its version: an older version is *stale* evidence, not another question",
        lambda a: a.config.engine.name,
        ("config.engine",),
    ),
    Part(
        "model",
        "the model",
        ModelInfo,
        MODEL,
        "",
        lambda a: a.config.model.model_dump(mode="json", include=set(MODEL)),
        ("config.model",),
    ),
    Part(
        "hardware",
        "the hardware",
        Hardware,
        HARDWARE,
        "not the host's name, nor which of its GPUs",
        lambda a: a.config.hardware.model_dump(mode="json", include=set(HARDWARE)),
        ("config.hardware",),
    ),
    Part(
        "server_args",
        "the server arguments common to both arms",
        Config,
        ("server_args",),
        "",
        lambda a: a.config.server_args,
        ("config.server_args",),
    ),
    Part(
        "vllm_env",
        "the server's environment",
        Config,
        ("server_env",),
        "only its `VLLM_*` variables: vLLM's settings, not paths and other plumbing",
        lambda a: _vllm_env(a.config),
        ("config.server_env",),
    ),
    Part(
        "arms",
        "the settings of the baseline and of the variant judged against it",
        Variant,
        tuple(Variant.model_fields),
        "not the arms' names",
        lambda a: [
            a.config.variants[name].model_dump(mode="json", exclude_none=True)
            for name in (a.config.baseline, a.variant)
        ],
        ("config.variants",),
    ),
    Part(
        "workload",
        "the workload",
        Workload,
        (*WORKLOAD, "arrivals", "prefixes", "sessions", "synthetic", "trace", "usage"),
        "asking for `usage` on every chunk costs the server a few per cent; a measured record "
        "that does not say asked on every chunk, and started each request as soon as its "
        "concurrency let it (`request_rate: inf`); of `arrivals`, the process and its "
        "burstiness, not the seed; of `prefixes`, their count and length, not the seed; of "
        "`synthetic`, the lengths' distributions, not the seed; of `trace`, its slice, speed "
        "and bounds (the file is the `prompt_suite`), not the seed",
        _workload,
        tuple(path for path in get_args(Unknowable) if path.startswith("workload.")),
    ),
)


def rule() -> str:
    """The rule in words, as Markdown: the parts of `ASKED`, and what is not part of it."""
    lines = [
        "Two records ask the same question when they agree on everything that could change "
        "the answer:",
        "",
    ]
    for part in ASKED:
        note = f" — {part.note}" if part.note else ""
        lines.append(_wrapped(f"- {part.what} ({_names(part.fields)}){note};", "  "))
    lines[-1] = lines[-1].removesuffix(";") + "."
    lines += [
        "",
        _wrapped(
            f"Not part of it: the workload's {_names(NOT_ASKED)} (seeds, warm-up, repeats, "
            "rounds and the stopping design say how carefully it was measured, token counts "
            "what came of it, not what was asked), and the experiment's id (a spec edited "
            "between two runs asks another question under the same name). A record without a "
            "configuration, or with more than "
            "one variant and no verdict to say which is judged, answers no question; so does a "
            "record that lists one of these under `unknown` (an import whose tool's file and "
            "spec did not say it): two records that both lack a field may differ in it, so an "
            "unknown matches nothing."
        ),
        "",
        _wrapped(
            "A sweep answers a question per cell: each variant against the baseline at each of "
            "its `loads`, the level's `concurrency` and `max_tokens` taken for the workload's. "
            "A cell and an A/B record of one question replicate or contradict each other as two "
            "A/B records do, and so do the cells of two sweeps."
        ),
    ]
    return "\n".join(lines)


def _wrapped(text: str, indent: str = "") -> str:
    """`text` in lines of at most 96 characters, as the docs' source is written."""
    return textwrap.fill(
        text, 96, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _names(names: tuple[str, ...]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{name}`" for name in names]
    return " and ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


def arms(record: Record) -> tuple[str, str] | None:
    """The baseline and the variant judged against it (the verdict's, else the only other
    arm); None when there is no such pair."""
    config = record.config
    if config is None:
        return None
    variant = record.verdict.variant if record.verdict else None
    if variant is None:
        others = [name for name in config.variants if name != config.baseline]
        if len(others) != 1:
            return None
        variant = others[0]
    if variant not in config.variants or config.baseline not in config.variants:
        return None
    return config.baseline, variant


def question_of(
    record: Record, variant: str | None = None, load: Load | None = None
) -> tuple[str, str, Facets] | None:
    """The key, a readable label and the facets (what the key is made of, in words: `tell_apart`
    says from them what sets two questions of one label apart) of the question `record` answers
    by `ASKED`; None when it answers none. A sweep's cell asks its own: `variant` at `load`
    (by default the verdict's headline, at its load)."""
    config, hypothesis, pair = record.config, record.hypothesis, arms(record)
    if config is None or hypothesis is None or pair is None or unknown_read(record):
        return None
    variant = pair[1] if variant is None else variant
    if variant not in config.variants:
        return None
    if load is None:
        load = record.verdict.load if record.verdict else {}
    asked = Asked(record, config, hypothesis, variant, load)
    values = {part.key: part.value(asked) for part in ASKED}
    key = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
    return key, _label(record, variant, load), _facets(values)


def unknown_read(record: Record) -> list[str]:
    """The fields of `record` that the rule reads and the record says are unknown."""
    read = {path for part in ASKED for path in part.reads}
    return [path for path in record.unknown if path in read]


def _facets(values: dict[str, Any]) -> Facets:
    """What the parts of `ASKED` read (`values`, by part) beyond the label, as (what, value) in
    words: the server's settings as one facet, the fields of the hypothesis, model, hardware and
    workload by their names in the record (`max_tokens`), each arm's under `baseline.` and
    `variant.`."""
    settings = [*values["server_args"], *(f"{k}={v}" for k, v in values["vllm_env"].items())]
    out = [(SETTINGS, " ".join(settings))]
    for part in ("hypothesis", "model", "hardware", "workload"):
        out += _flat("", values[part] or {})
    baseline, variant = values["arms"]
    out += _flat("baseline.", baseline) + _flat("variant.", variant)
    # what the label says (the engine, the model's name) never differs between two of one label;
    # a field unset is left out (`tell_apart` reads it as unset): cards are cached by thousands
    return tuple(
        (name, value) for name, value in out if value not in ("", UNSET) and name != "name"
    )


def _flat(prefix: str, fields: dict[str, Any]) -> list[tuple[str, str]]:
    """`fields` as (dotted name, words) pairs, nested mappings flattened; a list is one value,
    its items space-separated."""
    out = []
    for name in sorted(fields):
        value = fields[name]
        if isinstance(value, dict):
            out += _flat(f"{prefix}{name}.", value)
        elif isinstance(value, list):
            out.append((prefix + name, " ".join(map(_words, value)) or "none"))
        else:
            out.append((prefix + name, _words(value)))
    return out


def _words(value: Any) -> str:
    if value is None:
        return UNSET
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)  # true, 0.7, {"a": 1}: as the record's YAML says


def tell_apart(facets: Mapping[str, Facets], fallback: Mapping[str, str]) -> dict[str, str]:
    """What sets apart each of several questions that share a label, in words, by key: every
    facet whose value is not the same in all of them, as `max_tokens 512`, the server's settings
    first and as the words one has and the others lack (`with --no-async-scheduling`, `without
    …`). Where that still leaves two alike (values that differ only in how they are written),
    each gets `fallback`'s words too (`as in RECORD`, its newest record)."""
    values = {key: dict(pairs) for key, pairs in facets.items()}
    names = sorted({name for pairs in facets.values() for name, _ in pairs}, key=_order)
    differ = [n for n in names if len({v.get(n, UNSET) for v in values.values()}) > 1]
    settings = _settings_said(values) if SETTINGS in differ else {}
    said = {
        key: " · ".join(
            dict.fromkeys(  # fields a record lacks the whole of, once: `trace unset`
                settings[key] if name == SETTINGS else _field_said(name, own) for name in differ
            )
        )
        for key, own in values.items()
    }
    alike = Counter(said.values())
    return {
        key: " · ".join(filter(None, [text, f"as in {fallback[key]}"])) if alike[text] > 1 else text
        for key, text in said.items()
    }


def _field_said(name: str, own: Mapping[str, str]) -> str:
    """`max_tokens 512`; a field unset as `max_tokens unset`, or as the widest group of fields
    it is in that the record has none of (`trace unset`, not each of the trace's fields)."""
    if name in own:
        return f"{name} {own[name]}"
    parts = name.split(".")
    for end in range(1, len(parts)):
        group = ".".join(parts[:end])
        if not any(n.startswith(group + ".") for n in own):
            return f"{group} {UNSET}"
    return f"{name} {UNSET}"


def _order(name: str) -> tuple[bool, str]:
    """The server's settings first, then by name: the same order in every label."""
    return name != SETTINGS, name


def _settings_said(values: Mapping[str, dict[str, str]]) -> dict[str, str]:
    """By key: `with W…` (the words of its settings that not all share), else `without W…` (the
    words of others' it lacks), else its settings as they are (the same words in another order)."""
    words = {key: v.get(SETTINGS, "").split() for key, v in values.items()}
    shared = set.intersection(*(set(w) for w in words.values()))
    anyone = sorted({w for ws in words.values() for w in ws} - shared)
    said = {}
    for key, own in words.items():
        extra = [w for w in own if w not in shared]
        if extra:
            said[key] = f"with {' '.join(extra)}"
        elif anyone:  # its words are all shared: it lacks every other one
            said[key] = f"without {' '.join(anyone)}"
        else:
            said[key] = f"{SETTINGS} {' '.join(own) or 'none'}"
    return said


def hardware(hw: Hardware) -> str:
    """`8 × NVIDIA H200`, `2 × Intel Xeon`: the accelerators, else the CPUs."""
    if hw.accelerator:
        return f"{hw.count} × {hw.accelerator}" if hw.count else hw.accelerator
    if hw.cpu:
        return f"{hw.cpu_count} × {hw.cpu}" if hw.cpu_count else hw.cpu
    return "unstated hardware"


def _label(record: Record, variant: str, load: Load) -> str:
    """`ngram vs baseline · smollm2-135m-instruct · 2 × Intel Xeon · vllm · concurrency 1`."""
    assert record.config is not None
    config = record.config
    parts = [
        f"{variant} vs {config.baseline}",
        config.model.name,
        hardware(config.hardware),
        config.engine.name,
    ]
    concurrency = load.get("concurrency", record.workload.concurrency if record.workload else None)
    if concurrency:
        parts.append(f"concurrency {concurrency}")
    return " · ".join(parts)
