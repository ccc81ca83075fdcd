"""A spec's `sweep:` grid: server settings become variants (a start each), loads become levels.

Pure: `variants` and `loads` return the grid, or problems located at `sweep.PATH`; the rules,
the names and why: docs/design.md, "Sweeps".
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import JsonValue, ValidationError

from kbgen.kb.models import Load, Variant

# the workload's settings a load level may set, by their names in a path
LOADS: dict[str, Literal["concurrency", "max_tokens", "request_rate"]] = {
    "concurrency": "concurrency",
    "max_tokens": "max_tokens",
    "request_rate": "request_rate",
}
# short names of the settings users sweep most, for readable variant names (`ngram-k3`)
SHORT = {
    "num_speculative_tokens": "k",
    "prompt_lookup_max": "lmax",
    "prompt_lookup_min": "lmin",
}
WHERE = (
    "a sweep varies VARIANT.speculative_config.FIELD, VARIANT.args.--FLAG, "
    "workload.concurrency, workload.max_tokens or workload.request_rate"
)

Problems = list[tuple[tuple[str | int, ...], str]]


def _values(path: str, values: Sequence[JsonValue], problems: Problems) -> bool:
    """Whether `values` can be swept: a list of scalars, not empty, each once."""
    if not values:
        problems.append((("sweep", path), "an empty list: give at least one value"))
        return False
    if any(isinstance(v, list | dict) or v is None for v in values):
        problems.append((("sweep", path), "values are numbers, strings or booleans"))
        return False
    if len({repr(v) for v in values}) != len(values):
        problems.append((("sweep", path), "a value is listed twice"))
        return False
    return True


MAX_RATE = 100_000  # requests per second, far more than one client keeps (bench/perf)


def _rate(value: JsonValue) -> float | None:
    """A swept request rate: a number of requests per second above 0, up to MAX_RATE."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if 0 < value <= MAX_RATE else None


def loads(sweep: Mapping[str, Sequence[JsonValue]], problems: Problems) -> list[Load]:
    """The load levels of the sweep's client-side paths, every combination in path order
    (`[{}]`, one level, when it has none)."""
    axes: list[tuple[Literal["concurrency", "max_tokens", "request_rate"], list[Any]]] = []
    for path, values in sweep.items():
        part, _, name = path.partition(".")
        if part != "workload":
            continue
        key = LOADS.get(name)
        if key is None:
            message = (
                f"{name!r} is not a load: only concurrency, max_tokens and request_rate change "
                "inside one server start (anything else is a setting of the spec)"
            )
            problems.append((("sweep", path), message))
            continue
        if not _values(path, values, problems):
            continue
        if key == "request_rate":
            rates = [rate for v in values if (rate := _rate(v)) is not None]
            if len(rates) != len(values):
                message = f"request_rate values are requests per second, above 0, to {MAX_RATE:g}"
                problems.append((("sweep", path), message))
                continue
            axes.append((key, rates))
            continue
        counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 1]
        if len(counts) != len(values):
            problems.append((("sweep", path), f"{name} values are whole numbers from 1"))
            continue
        axes.append((key, counts))
    out: list[Load] = []
    for combo in itertools.product(*(values for _, values in axes)):
        level: Load = {}
        for (name, _), value in zip(axes, combo, strict=True):
            level[name] = value
        out.append(level)
    return out


def variants(
    baseline: str,
    given: Mapping[str, Variant],
    sweep: Mapping[str, Sequence[JsonValue]],
    problems: Problems,
) -> dict[str, Variant]:
    """The variants with every server-side path expanded: a swept variant is replaced, in its
    place, by one variant per combination of its paths' values, named `VARIANT-k3-lmax4`."""
    axes: dict[str, list[tuple[str, str, Sequence[JsonValue]]]] = {}
    for path, values in sweep.items():
        name, _, rest = path.partition(".")
        if name == "workload":
            continue
        field, _, setting = rest.partition(".")
        if name not in given:
            known = ", ".join(sorted(given))
            problems.append((("sweep", path), f"{name!r} is not a variant ({known}); {WHERE}"))
        elif name == baseline:
            message = "the baseline is not swept: every setting is compared against it"
            problems.append((("sweep", path), message))
        elif field not in ("speculative_config", "args") or not setting:
            problems.append((("sweep", path), f"not a setting of a variant: {WHERE}"))
        elif _values(path, values, problems):
            axes.setdefault(name, []).append((field, setting, values))
    out: dict[str, Variant] = {}
    for name, variant in given.items():
        if name not in axes:
            out[name] = variant
            continue
        for combo in itertools.product(*(values for _, _, values in axes[name])):
            settings = [(f, s, v) for (f, s, _), v in zip(axes[name], combo, strict=True)]
            expanded = _expanded(name, variant, settings, problems)
            if expanded is None:
                continue
            label = "-".join([name, *(_label(s, v) for _, s, v in settings)])
            if label in out or label in given:
                message = f"two variants would be named {label!r}"
                problems.append((("sweep", f"{name}.{settings[0][0]}.{settings[0][1]}"), message))
            out[label] = expanded
    return out


def _expanded(
    name: str, variant: Variant, settings: list[tuple[str, str, JsonValue]], problems: Problems
) -> Variant | None:
    """`variant` with each (field, setting, value) set, validated as a variant; None (and the
    problem at the path) when a value does not fit."""
    data: dict[str, Any] = variant.model_dump(exclude_none=True, exclude_defaults=True)
    for field, setting, value in settings:
        path = f"{name}.{field}.{setting}"
        if field == "speculative_config":
            config = data.get("speculative_config")
            if config is None:
                problems.append((("sweep", path), f"{name!r} has no speculative_config"))
                return None
            config[setting] = value
        else:
            data["args"] = _with_arg(list(data.get("args", [])), setting, value)
    try:
        return Variant.model_validate(data)
    except ValidationError as exc:
        field, setting, value = settings[-1]
        message = f"{value!r} does not fit: {exc.errors()[0]['msg']}"
        problems.append((("sweep", f"{name}.{field}.{setting}"), message))
        return None


def _with_arg(args: list[str], flag: str, value: JsonValue) -> list[str]:
    """`args` with `flag`'s value set: the one after it replaced, or both appended."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if flag in args and args.index(flag) + 1 < len(args):
        at = args.index(flag)
        return [*args[: at + 1], text, *args[at + 2 :]]
    return [*args, flag, text]


def _label(setting: str, value: JsonValue) -> str:
    """A setting's value as part of a variant's name: `k3`, `max-num-seqs8`."""
    short = SHORT.get(setting) or setting.lstrip("-").replace("_", "-").lower()
    text = re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "x"
    return f"{short}{text}" if short[-1:].isalpha() and text[:1].isdigit() else f"{short}-{text}"
