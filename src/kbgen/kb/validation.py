"""`kbgen validate`: the files asked for, checked alone and for the references they make.

Only the problems of those files are reported: another file's are for its own validation.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from kbgen.errors import InvalidInput, UsageError
from kbgen.kb import files, loading


def validate(paths: list[Path], records: Path, cache: Path | None = None) -> Counter[str]:
    """How many records and plans the YAML files under `paths` hold, every one valid against
    the schema and its references valid in the knowledge base `records` (a plan's task, a
    superseded record, an id no other file has); InvalidInput with the problems found in them.
    `cache` remembers what was valid (`loading.load_facts`)."""
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
    wanted = files.iter_yaml_files(paths)
    context = files.iter_yaml_files([records]) if records.is_dir() else []
    base = loading.load_facts(sorted({*wanted, *context}), cache=cache)
    asked = set(wanted)
    problems = [p for p in base.problems if p.path in asked]
    if problems:
        raise InvalidInput(problems)
    return Counter(base.facts[path].kind for path in wanted if path in base.facts)
