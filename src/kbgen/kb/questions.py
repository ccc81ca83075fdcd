"""Which question a record answers: the key two records share when they test the same one.

**The rule.** Two records test the same question on a comparable setup when they agree on
everything that could change the answer (`question_of` builds the key from it):

- the hypothesis: its primary metric, direction and minimum effect;
- the engine's name (not its version: an older version is *stale* evidence, below);
- the model: name and quantization;
- the hardware: CPU, CPU count, accelerator, count and interconnect (not the host's name);
- the server arguments common to both arms and the `VLLM_*` variables of their environment
  (vLLM's settings; not paths and other plumbing), and the settings (arguments and speculative
  configuration) of the baseline and of the variant judged against it — not the arms' names;
- the workload's prompt suite, concurrency, output length, temperature, API, whether EOS
  was ignored and how token counts were asked for (`usage`: on every chunk costs the server a
  few per cent; a measured record that does not say asked on every chunk) — not the seeds,
  warm-up, repeats or rounds: those are how carefully it was measured, not what was asked.

A record without a configuration, or with more than one variant and no verdict to say which
is judged, answers no question here. The experiment's id (the spec's file name) is not part
of the rule: a spec edited between two runs asks a different question under the same name.
"""

from __future__ import annotations

import hashlib
import json

from kbgen.kb.models import Record

RULE = 3  # of `question_of`: cached cards, which keep its key, are keyed by it


def _usage(record: Record) -> str | None:
    """How a record's client asked for token counts; kbgen's runs from before the field was
    kept asked on every chunk."""
    measured = record.provenance is not None and record.provenance.source == "measured"
    usage = record.workload.usage if record.workload else None
    return usage or ("continuous" if measured else None)


def question_of(record: Record) -> tuple[str, str, str] | None:
    """The key, a readable label and the common settings (server arguments and `VLLM_*`
    variables, which tell apart two questions of one label) of the question `record` answers;
    None when it has none (the rule is in this module's docstring)."""
    config, workload, hypothesis = record.config, record.workload, record.hypothesis
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
    arms = [config.variants[config.baseline], config.variants[variant]]
    vllm_env = {k: v for k, v in sorted(config.server_env.items()) if k.startswith("VLLM_")}
    asked = {
        "hypothesis": hypothesis.model_dump(
            mode="json", include={"primary_metric", "direction", "minimum_effect"}
        ),
        "engine": config.engine.name,
        "model": config.model.model_dump(mode="json", include={"name", "quantization"}),
        "hardware": config.hardware.model_dump(mode="json", exclude={"host"}),
        "server_args": config.server_args,
        "vllm_env": vllm_env,
        "arms": [arm.model_dump(mode="json", exclude_none=True) for arm in arms],
        "workload": None
        if workload is None
        else workload.model_dump(
            mode="json",
            include={
                "prompt_suite",
                "concurrency",
                "max_tokens",
                "temperature",
                "api",
                "ignore_eos",
            },
        )
        | {"usage": _usage(record)},
    }
    key = hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]
    settings = [*config.server_args, *(f"{k}={v}" for k, v in vllm_env.items())]
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
