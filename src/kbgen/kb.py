"""The knowledge base as a whole: load every record and plan, validate each, check references.

A file is a plan when it sits in a folder named ``plans``, otherwise a record. Every problem is
reported, not just the first, each located as ``file:line: dotted.path: message``. Valid files
are parsed once by the fast loader; only a file with problems is parsed again with positions,
so validating a large, healthy knowledge base stays quick.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kbgen import store
from kbgen.errors import InvalidInput, Problem
from kbgen.models import Plan, Record

PLANS_FOLDER = "plans"


@dataclass
class KnowledgeBase:
    """Valid records and plans by id, with the file each came from, and every problem found."""

    records: dict[str, Record] = field(default_factory=dict)
    plans: dict[str, Plan] = field(default_factory=dict)
    paths: dict[tuple[str, str], Path] = field(default_factory=dict)  # (kind, id) -> file
    problems: list[Problem] = field(default_factory=list)
    # (kind, file stem) of files that failed: references to them are not reported as dangling,
    # since the file's own problems already say what is wrong
    broken: set[tuple[str, str]] = field(default_factory=set)

    def path_of(self, doc: Record | Plan) -> Path:
        return self.paths[(_kind_name(doc), doc.id)]


def _kind_name(doc: Record | Plan) -> str:
    return "plan" if isinstance(doc, Plan) else "record"


def kind_of(path: Path) -> type[Record] | type[Plan]:
    """Plans live in a `plans/` folder; every other YAML file is a record."""
    return Plan if path.parent.name == PLANS_FOLDER else Record


def _dotted(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field (not in the schema; check its spelling)"
    if error["type"] == "missing":
        return "required field is missing"
    return str(error["msg"])


def problems_of(path: Path, exc: ValidationError) -> list[Problem]:
    """Pydantic errors as located problems, positions taken from a round-trip parse."""
    tree = store.load_document(path).data
    # A value that fits no member of a union gets one error per member at the same place:
    # join them into one line.
    messages: dict[tuple[int, str], list[str]] = {}
    for error in exc.errors(include_url=False):
        line, found = store.line_of(tree, error["loc"])
        said = messages.setdefault((line, _dotted(found)), [])
        if _message(error) not in said:
            said.append(_message(error))
    return [
        Problem(path, line, field, "; or ".join(said))
        for (line, field), said in sorted(messages.items())
    ]


def load_file(path: Path) -> Record | Plan:
    """One validated record or plan; raises InvalidInput listing all its problems."""
    model = kind_of(path)
    data = store.load_fast(path)
    try:
        doc = model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc)) from exc
    if doc.id != path.stem:
        line, _ = store.line_of(store.load_document(path).data, ["id"])
        raise InvalidInput(
            [Problem(path, line, "id", f"{doc.id!r} must equal the file name ({path.stem!r})")]
        )
    return doc


def load(paths: Iterable[Path]) -> KnowledgeBase:
    """Every record and plan under `paths`, validated and cross-checked."""
    kb = KnowledgeBase()
    for path in store.iter_yaml_files(paths):
        try:
            doc = load_file(path)
        except InvalidInput as exc:
            kb.problems.extend(exc.problems)
            kb.broken.add(("plan" if kind_of(path) is Plan else "record", path.stem))
            continue
        key = (_kind_name(doc), doc.id)
        if key in kb.paths:
            kb.problems.append(
                _located(path, ["id"], f"{doc.id!r} is also the id of {kb.paths[key]}")
            )
            continue
        kb.paths[key] = path
        if isinstance(doc, Plan):
            kb.plans[doc.id] = doc
        else:
            kb.records[doc.id] = doc
    kb.problems.extend(_reference_problems(kb))
    return kb


def _located(path: Path, loc: list[str | int], message: str) -> Problem:
    line, found = store.line_of(store.load_document(path).data, loc)
    return Problem(path, line, _dotted(found), message)


def _reference_problems(kb: KnowledgeBase) -> list[Problem]:
    problems = []
    for record in kb.records.values():
        path = kb.path_of(record)
        for i, ref in enumerate(record.resolves):
            plan_id, task_id = ref.split("#", 1)
            plan = kb.plans.get(plan_id)
            if ("plan", plan_id) in kb.broken:
                continue
            if plan is None:
                problems.append(_located(path, ["resolves", i], f"no plan {plan_id!r}"))
            elif task_id not in {t.id for t in plan.tasks}:
                problems.append(
                    _located(path, ["resolves", i], f"plan {plan_id!r} has no task {task_id!r}")
                )
        for section in ("supersedes", "related"):
            for i, other in enumerate(getattr(record, section)):
                if other not in kb.records and ("record", other) not in kb.broken:
                    problems.append(_located(path, [section, i], f"no record {other!r}"))
    return problems
