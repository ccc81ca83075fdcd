"""How the pages write a figure, a change, a share, a load, a parallel layout; `–` for none."""

from __future__ import annotations

from collections.abc import Mapping

from kbgen.kb.models import EffectiveSettings, Load


def number(value: float | None, digits: int = 3) -> str:
    """A figure to `digits` significant digits, thousands whole: `62.6`, `1,234`."""
    if value is None:
        return "–"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def percent(value: float | None) -> str:
    """A change, signed: `+9.0%`, `-26.0%`."""
    return "–" if value is None else f"{value:+.1%}"


def percent_plain(value: float | None) -> str:
    """A share, such as 0.8 → 80%."""
    return "–" if value is None else f"{value:.0%}"


def load(value: Load) -> str:
    """A sweep's load level in words: `concurrency 8`, `concurrency 8, max tokens 256`; `–` for
    the one load."""
    return ", ".join(f"{key.replace('_', ' ')} {n}" for key, n in value.items()) or "–"


# the engine config's parallel sizes (vLLM's `Initializing a V1 LLM engine … with config:`)
PARALLEL = {
    "tensor_parallel_size": "tensor-parallel",
    "pipeline_parallel_size": "pipeline-parallel",
    "data_parallel_size": "data-parallel",
    "prefill_context_parallel_size": "prefill context-parallel",
    "decode_context_parallel_size": "decode context-parallel",
}


def parallel_layout(effective: Mapping[str, EffectiveSettings]) -> str | None:
    """How the servers' engines were split, from the sizes their logs gave above 1:
    `tensor-parallel 2`, `tensor-parallel 4 × pipeline-parallel 2`; each arm's where they
    differ; None when every arm ran as a single rank (or said nothing)."""
    layouts = {
        arm: " × ".join(
            f"{words} {size}"
            for key, words in PARALLEL.items()
            if (size := settings.config.get(key, "1")) != "1"
        )
        for arm, settings in effective.items()
    }
    if not any(layouts.values()):
        return None
    if len(set(layouts.values())) == 1:
        return next(iter(layouts.values()))
    return "; ".join(f"{arm}: {layout or 'one rank'}" for arm, layout in layouts.items())
