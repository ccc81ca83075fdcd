"""Which question a record answers: the key two records share when they test the same one.

The rule is data: `ASKED` holds one `Part` per thing two records must agree on, its words and
the value it reads; `question_of` hashes the values and `rule` writes the words (the README's
statement of the rule is generated from it, so the two cannot drift).
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbgen.kb.models import (
    Config,
    Engine,
    Hardware,
    Hypothesis,
    Model,
    ModelInfo,
    Record,
    Variant,
    Workload,
)

RULE = 3  # of `question_of`: cached cards, which keep its key, are keyed by it


@dataclass(frozen=True)
class Asked:
    """What the parts of the rule read: a record with a configuration and a hypothesis, and the
    variant judged against its baseline."""

    record: Record
    config: Config
    hypothesis: Hypothesis
    variant: str


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


HYPOTHESIS = ("primary_metric", "direction", "minimum_effect")
MODEL = ("name", "quantization")
HARDWARE = tuple(name for name in Hardware.model_fields if name != "host")
WORKLOAD = ("prompt_suite", "concurrency", "max_tokens", "temperature", "api", "ignore_eos")
NOT_ASKED = tuple(name for name in Workload.model_fields if name not in {*WORKLOAD, "usage"})


def _usage(record: Record) -> str | None:
    """How a record's client asked for token counts; kbgen's runs from before the field was
    kept asked on every chunk."""
    measured = record.provenance is not None and record.provenance.source == "measured"
    usage = record.workload.usage if record.workload else None
    return usage or ("continuous" if measured else None)


def _vllm_env(config: Config) -> dict[str, str]:
    return {k: v for k, v in sorted(config.server_env.items()) if k.startswith("VLLM_")}


def _workload(asked: Asked) -> dict[str, Any] | None:
    workload = asked.record.workload
    if workload is None:
        return None
    return workload.model_dump(mode="json", include=set(WORKLOAD)) | {"usage": _usage(asked.record)}


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
    ),
    Part(
        "model",
        "the model",
        ModelInfo,
        MODEL,
        "",
        lambda a: a.config.model.model_dump(mode="json", include=set(MODEL)),
    ),
    Part(
        "hardware",
        "the hardware",
        Hardware,
        HARDWARE,
        "not the host's name",
        lambda a: a.config.hardware.model_dump(mode="json", include=set(HARDWARE)),
    ),
    Part(
        "server_args",
        "the server arguments common to both arms",
        Config,
        ("server_args",),
        "",
        lambda a: a.config.server_args,
    ),
    Part(
        "vllm_env",
        "the server's environment",
        Config,
        ("server_env",),
        "only its `VLLM_*` variables: vLLM's settings, not paths and other plumbing",
        lambda a: _vllm_env(a.config),
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
    ),
    Part(
        "workload",
        "the workload",
        Workload,
        (*WORKLOAD, "usage"),
        "asking for `usage` on every chunk costs the server a few per cent; a measured record "
        "that does not say asked on every chunk",
        _workload,
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
            f"Not part of it: the workload's {_names(NOT_ASKED)} (seeds, warm-up, repeats and "
            "rounds say how carefully it was measured, not what was asked), and the experiment's "
            "id (a spec edited between two runs asks another question under the same name). A "
            "record without a configuration, or with more than one variant and no verdict to say "
            "which is judged, answers no question."
        ),
    ]
    return "\n".join(lines)


def _wrapped(text: str, indent: str = "") -> str:
    """`text` in lines of at most 96 characters, as the README's source is written."""
    return textwrap.fill(
        text, 96, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def _names(names: tuple[str, ...]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{name}`" for name in names]
    return " and ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


def question_of(record: Record) -> tuple[str, str, str] | None:
    """The key, a readable label and the common settings (server arguments and `VLLM_*`
    variables, which tell apart two questions of one label) of the question `record` answers
    by `ASKED`; None when it answers none."""
    config, hypothesis = record.config, record.hypothesis
    if config is None or hypothesis is None:
        return None
    variant = record.verdict.variant if record.verdict else None
    if variant is None:
        others = [name for name in config.variants if name != config.baseline]
        if len(others) != 1:
            return None
        variant = others[0]
    if variant not in config.variants or config.baseline not in config.variants:
        return None
    asked = Asked(record, config, hypothesis, variant)
    values = {part.key: part.value(asked) for part in ASKED}
    key = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
    settings = [*config.server_args, *(f"{k}={v}" for k, v in _vllm_env(config).items())]
    return key, _label(record, variant), " ".join(settings)


def _label(record: Record, variant: str) -> str:
    """`ngram vs baseline · smollm2-135m-instruct · 2 × Intel Xeon · vllm · concurrency 1`."""
    assert record.config is not None
    config = record.config
    hw = config.hardware
    if hw.accelerator:
        hardware = f"{hw.count} × {hw.accelerator}" if hw.count else hw.accelerator
    elif hw.cpu:
        hardware = f"{hw.cpu_count} × {hw.cpu}" if hw.cpu_count else hw.cpu
    else:
        hardware = "unstated hardware"
    parts = [f"{variant} vs {config.baseline}", config.model.name, hardware, config.engine.name]
    if record.workload and record.workload.concurrency:
        parts.append(f"concurrency {record.workload.concurrency}")
    return " · ".join(parts)
