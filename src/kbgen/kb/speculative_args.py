"""vLLM's speculative-decoding options in a list of server arguments, read into one mapping.

`split` reads every form vLLM takes (`--speculative-config JSON`, `-sc`, the dotted form,
`--spec-*`) as vLLM reads it, and a key given twice is a problem (docs/design.md, "Speculative
decoding written as server arguments").
"""

from __future__ import annotations

import json
from typing import Any

_WHOLE = ("--speculative-config", "-sc")
_SINGLE = {
    "--spec-method": "method",
    "--spec-model": "model",
    "--spec-tokens": "num_speculative_tokens",
}

Problems = list[tuple[int, str]]  # (index in the arguments, message)


def _name(arg: str) -> tuple[str, str | None]:
    """An option's name as vLLM reads it (`_` as `-` up to the first dot), and its `=VALUE`."""
    name, eq, value = arg.partition("=")
    if name.startswith("--"):
        head, dot, rest = name.partition(".")
        name = head.replace("_", "-") + dot + rest
    return name, value if eq else None


def _is_speculative(name: str) -> bool:
    return name in _WHOLE or name in _SINGLE or name.startswith("--speculative-config.")


def split(args: list[str]) -> tuple[list[str], dict[str, Any] | None, int | None, Problems]:
    """The arguments without their speculative options; the mapping those give (None: none);
    the index of the first such option; and the problems found, each at its argument."""
    rest: list[str] = []
    found: dict[str, Any] = {}
    where: int | None = None
    problems: Problems = []
    i = 0
    while i < len(args):
        name, value = _name(args[i])
        if not _is_speculative(name):
            rest.append(args[i])
            i += 1
            continue
        where = i if where is None else where
        at = i
        if value is None:
            if i + 1 == len(args):
                problems.append((at, f"{args[i]} needs a value"))
                break
            value = args[i + 1]
            i += 1
        i += 1
        for key, item in _entries(name, value, at, problems):
            if key in found:
                problems.append((at, f"speculative config key {key!r} is given twice"))
            found[key] = item
    return rest, (found if where is not None else None), where, problems


def _entries(name: str, value: str, at: int, problems: Problems) -> list[tuple[str, Any]]:
    """The top-level keys and values one speculative option gives."""
    if name in _SINGLE:
        key = _SINGLE[name]
        if key != "num_speculative_tokens":
            return [(key, value)]
        try:
            return [(key, int(value))]
        except ValueError:
            problems.append((at, f"{name}: {value!r} is not an integer"))
            return []
    if name in _WHOLE:
        try:
            mapping = json.loads(value)
        except (ValueError, RecursionError) as exc:
            problems.append((at, f"{name}: not JSON ({exc})"))
            return []
        if not isinstance(mapping, dict):
            problems.append((at, f"{name}: should be a JSON object"))
            return []
        return [(str(k).replace("-", "_"), v) for k, v in mapping.items()]
    keys = name.removeprefix("--speculative-config.").split(".")
    if not all(keys):
        problems.append((at, f"{name}: an empty key"))
        return []
    try:
        item: Any = json.loads(value)
    except (ValueError, RecursionError):
        item = value
    for key in reversed(keys[1:]):
        item = {key: item}
    return [(keys[0].replace("-", "_"), item)]
