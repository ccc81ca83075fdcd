"""Prompt suites: JSONL files with one `{"class": ..., "prompt": ...}` object per line.

Lines are kept in file order, so the same spec sends the same prompts in the same order; a suite
is read as any input file is (`files.read_regular`: a regular file, at most `MAX_BYTES`). A line
may name its prompt's `group` (a template, a source: the verdict's unit, then).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files

MAX_BYTES = 64 * files.MIB  # the seed suite is 20 KB; a suite this large is a mistake


@dataclass(frozen=True)
class Prompt:
    """One line of a suite: its prompt, its class, and where it stands in the file."""

    line: int
    prompt_class: str
    text: str
    group: str | None = None


def read(path: Path) -> list[Prompt]:
    """Every prompt of the suite, in file order; InvalidInput names file and line."""
    found, problems = _read(path)
    if problems:
        raise InvalidInput(problems)
    return found


def _read(path: Path) -> tuple[list[Prompt], list[Problem]]:
    """The suite's prompts, and the problems of the lines that are none."""
    if not path.exists() and not path.is_symlink():
        raise InvalidInput([Problem(path, None, "", "no such prompt file")])
    found: list[Prompt] = []
    lines, problems = files.json_lines(path, files.read_regular(path, MAX_BYTES))
    for number, entry in lines:
        if not isinstance(entry, dict) or not isinstance(entry.get("prompt"), str):
            problems.append(Problem(path, number, "prompt", "each line needs a string `prompt`"))
            continue
        name = entry.get("class", "default")
        if not isinstance(name, str):
            problems.append(Problem(path, number, "class", "`class` must be a string"))
            continue
        group = entry.get("group")
        if group is not None and not isinstance(group, str):
            problems.append(Problem(path, number, "group", "`group` must be a string"))
            continue
        found.append(Prompt(number, name, entry["prompt"], group))
    return found, problems


def load(path: Path, classes: list[str], per_class: int | None = None) -> dict[str, list[str]]:
    """The prompts of each wanted class, in file order; InvalidInput names file and line."""
    found: dict[str, list[str]] = {name: [] for name in classes}
    suite, problems = _read(path)
    for prompt in suite:
        if prompt.prompt_class in found:
            found[prompt.prompt_class].append(prompt.text)
    problems += [
        Problem(path, None, "class", f"no prompt of class {name!r}")
        for name, prompts in found.items()
        if not prompts
    ]
    if problems:
        raise InvalidInput(problems)
    return {name: prompts[:per_class] for name, prompts in found.items()}


def groups(
    path: Path, classes: list[str], per_class: int | None = None
) -> dict[str, list[str | None]] | None:
    """The group of each prompt `load` gives, class by class (None where a line names none);
    None when no line of the suite names a group."""
    suite = read(path)
    if all(p.group is None for p in suite):
        return None
    found: dict[str, list[str | None]] = {name: [] for name in classes}
    for prompt in suite:
        if prompt.prompt_class in found:
            found[prompt.prompt_class].append(prompt.group)
    return {name: named[:per_class] for name, named in found.items()}
