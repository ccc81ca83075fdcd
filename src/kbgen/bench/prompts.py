"""Prompt suites: JSONL files with one `{"class": ..., "prompt": ...}` object per line.

The repository's suite (`bench/prompts/seed.jsonl`) holds the reference experiment's three
classes — coding, math, explanatory; a user's own file has the same shape. Lines are kept in file
order, so a suite is deterministic: the same spec sends the same prompts in the same order.
"""

from __future__ import annotations

import json
from pathlib import Path

from kbgen.errors import InvalidInput, Problem


def load(path: Path, classes: list[str], per_class: int | None = None) -> dict[str, list[str]]:
    """The prompts of each wanted class, in file order; InvalidInput names file and line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise InvalidInput([Problem(path, None, "", "no such prompt file")]) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput([Problem(path, None, "", f"cannot read: {exc}")]) from exc
    found: dict[str, list[str]] = {name: [] for name in classes}
    problems = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(path, number, "", f"not JSON: {exc.msg}"))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("prompt"), str):
            problems.append(Problem(path, number, "prompt", "each line needs a string `prompt`"))
            continue
        name = entry.get("class", "default")
        if not isinstance(name, str):
            problems.append(Problem(path, number, "class", "`class` must be a string"))
            continue
        if name in found:
            found[name].append(entry["prompt"])
    problems += [
        Problem(path, None, "class", f"no prompt of class {name!r}")
        for name, prompts in found.items()
        if not prompts
    ]
    if problems:
        raise InvalidInput(problems)
    return {name: prompts[:per_class] for name, prompts in found.items()}
