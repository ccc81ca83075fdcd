"""The knowledge base as a whole: load every record and plan, validate each, check references.

A file is a plan when it sits in a folder named ``plans``, otherwise a record. Every problem is
reported, not just the first, each located as ``file:line: dotted.path: message``. Valid files
are parsed once by the fast loader; only a file with problems is parsed again with positions,
so validating a large, healthy knowledge base stays quick.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, astuple, dataclass, field
from datetime import date
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbgen import __version__
from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files, store
from kbgen.kb.models import Plan, Record, Status, json_schemas
from kbgen.kb.problems import located, problems_of

PLANS_FOLDER = "plans"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Facts:
    """What the cross-file checks need to know of one valid file (cached between runs)."""

    kind: str  # "record" or "plan"
    id: str
    refs: tuple[tuple[str, str], ...] = ()  # (section, target) in file order: resolves, ...
    tasks: tuple[str, ...] = ()  # task ids, for a plan

    @classmethod
    def of(cls, doc: Record | Plan) -> Facts:
        if isinstance(doc, Plan):
            return cls("plan", doc.id, tasks=tuple(t.id for t in doc.tasks))
        refs = [(section, ref) for section in REF_SECTIONS for ref in getattr(doc, section)]
        return cls("record", doc.id, refs=tuple(refs))


REF_SECTIONS = ("resolves", "supersedes", "related")


@dataclass
class KnowledgeBase:
    """Valid records and plans by id, with the file each came from, and every problem found.

    Loaded with ``models=False`` (what `kbgen validate` needs), only ``facts`` are filled:
    files unchanged since the last run are then not even parsed.
    """

    records: dict[str, Record] = field(default_factory=dict)
    plans: dict[str, Plan] = field(default_factory=dict)
    facts: dict[Path, Facts] = field(default_factory=dict)  # every valid file
    paths: dict[tuple[str, str], Path] = field(default_factory=dict)  # (kind, id) -> file
    problems: list[Problem] = field(default_factory=list)
    # (kind, file stem) of files that failed: references to them are not reported as dangling,
    # since the file's own problems already say what is wrong
    broken: set[tuple[str, str]] = field(default_factory=set)
    # with `load(each=...)`: what `each` made of every valid file, in place of its model
    products: dict[Path, Any] = field(default_factory=dict)
    from_cache: set[Path] = field(default_factory=set)  # files whose facts and product were cached

    def path_of(self, doc: Record | Plan) -> Path:
        return self.paths[("plan" if isinstance(doc, Plan) else "record", doc.id)]


def kind_of(path: Path) -> type[Record] | type[Plan]:
    """Plans live in a `plans/` folder; every other YAML file is a record."""
    return Plan if path.parent.name == PLANS_FOLDER else Record


def load_model(path: Path, model: type[M]) -> M:
    """A YAML file validated as `model`; InvalidInput listing all its problems otherwise."""
    data = store.load_fast(path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc, store.load_document(path).data)) from exc


def load_file(path: Path) -> Record | Plan:
    """One validated record or plan; raises InvalidInput listing all its problems."""
    doc = load_model(path, kind_of(path))
    if doc.id != path.stem:
        line, _ = store.line_of(store.load_document(path).data, ["id"])
        raise InvalidInput(
            [Problem(path, line, "id", f"{doc.id!r} must equal the file name ({path.stem!r})")]
        )
    return doc


PARALLEL_FROM = 256  # files to parse before a second process pays for its start-up


def load(
    paths: Iterable[Path],
    *,
    models: bool = True,
    cache: Path | None = None,
    each: Callable[[Record | Plan, Path], Any] | None = None,
    cache_key: str = "",
    trust: Callable[[Any], bool] | None = None,
    references: bool = True,
) -> KnowledgeBase:
    """Every record and plan under `paths`, validated and cross-checked.

    Many files are parsed in parallel, one process per core. With `each` (a picklable
    function), every valid document is handed to it in the process that parsed it, and what it
    returns is kept in ``products`` instead of the model: work on each file is then parallel
    too.

    With a `cache` file, files that are valid and unchanged (same size, mtime and inode) since
    the last run are not parsed at all: their facts — and with `each`, their products, which
    must then be JSON data — come from the cache. Models cannot be cached, so a cache needs
    ``models=False`` or `each`; `cache_key` names whatever else the products depend on, and
    `trust`, when given, may turn down a cached product (the file is then parsed again).
    With ``references=False`` links between files are not checked (for a partial set of files).
    """
    if cache is not None and models and each is None:
        raise ValueError("a cache serves loads without models, or with `each`")
    kb = KnowledgeBase()
    cached = files.FingerprintCache(cache, _cache_key() + cache_key) if cache else None
    found = files.iter_yaml_files(paths)
    known: dict[Path, Facts] = {}
    fingerprints: dict[Path, list[int]] = {}
    if cached is not None:
        for path in found:
            fingerprints[path] = fingerprint = files.fingerprint(path)
            hit = cached.get(path, fingerprint)
            if hit is not None and (each is None or trust is None or trust(hit[4])):
                known[path] = Facts(hit[0], hit[1], tuple(map(tuple, hit[2])), tuple(hit[3]))
                kb.from_cache.add(path)
                if each is not None:
                    kb.products[path] = hit[4]
    todo = [path for path in found if path not in known]
    examine: Callable[[Path], Examined] = _examine_with_model if models else _examine
    if each is not None:
        examine = partial(_examine_each, each)
    for path, doc, facts, problems in _map(examine, todo):
        if facts is None:
            kb.problems.extend(problems)
            kb.broken.add(("plan" if kind_of(path) is Plan else "record", path.stem))
            continue
        known[path] = facts
        if cached is not None:
            product = doc if each is not None else None
            cached.put(path, fingerprints[path], [*astuple(facts), product])
        if each is not None:
            kb.products[path] = doc
        elif isinstance(doc, Plan):
            kb.plans[doc.id] = doc
        elif isinstance(doc, Record):
            kb.records[doc.id] = doc
    for path in found:
        if (facts := known.get(path)) is None:
            continue
        key = (facts.kind, facts.id)
        if key in kb.paths:
            message = f"{facts.id!r} is also the id of {kb.paths[key]}"
            kb.problems.append(located(path, ["id"], message))
            continue
        kb.paths[key] = path
        kb.facts[path] = facts
    if cached is not None:
        cached.save()
    if references:
        kb.problems.extend(_reference_problems(kb))
    return kb


Examined = tuple[Path, Any, Facts | None, list[Problem]]  # (path, model or product, ...)


def _examine_with_model(path: Path) -> Examined:
    try:
        doc = load_file(path)
    except InvalidInput as exc:
        return path, None, None, exc.problems
    return path, doc, Facts.of(doc), []


def _examine(path: Path) -> Examined:
    """Like `_examine_with_model`, returning only what crosses a process boundary cheaply."""
    path, _, facts, problems = _examine_with_model(path)
    return path, None, facts, problems


def _examine_each(each: Callable[[Record | Plan, Path], Any], path: Path) -> Examined:
    path, doc, facts, problems = _examine_with_model(path)
    return path, None if doc is None else each(doc, path), facts, problems


def _map(func: Callable[[Path], Examined], paths: list[Path]) -> Iterator[Examined]:
    workers = os.cpu_count() or 1
    if workers < 2 or len(paths) < PARALLEL_FROM:
        yield from map(func, paths)
        return
    # forkserver, not fork: forking a process that may hold threads is unsafe
    with ProcessPoolExecutor(workers, mp_context=get_context("forkserver")) as pool:
        yield from pool.map(func, paths, chunksize=max(16, len(paths) // (workers * 8)))


def _cache_key() -> str:
    """Changes whenever kbgen or its schema does, so a cache never outlives its rules."""
    schema = json.dumps(json_schemas(), sort_keys=True)
    return hashlib.sha256(f"{__version__}\n{schema}".encode()).hexdigest()[:16]


def _reference_problems(kb: KnowledgeBase) -> list[Problem]:
    tasks = {f.id: set(f.tasks) for f in kb.facts.values() if f.kind == "plan"}
    records = {f.id for f in kb.facts.values() if f.kind == "record"}
    problems = []
    for path, facts in kb.facts.items():
        position: dict[str, int] = {}
        for section, ref in facts.refs:
            i = position[section] = position.get(section, -1) + 1
            if section == "resolves":
                plan_id, task_id = ref.split("#", 1)
                if ("plan", plan_id) in kb.broken:
                    continue
                if plan_id not in tasks:
                    problems.append(located(path, [section, i], f"no plan {plan_id!r}"))
                elif task_id not in tasks[plan_id]:
                    message = f"plan {plan_id!r} has no task {task_id!r}"
                    problems.append(located(path, [section, i], message))
            elif ref not in records and ("record", ref) not in kb.broken:
                problems.append(located(path, [section, i], f"no record {ref!r}"))
    return problems


@dataclass(frozen=True)
class Card:
    """What plan pages and indexes show of a record: small, so it crosses processes cheaply."""

    id: str
    title: str
    status: Status
    created: date
    concluded: date | None
    tags: tuple[str, ...]
    outcome: str | None  # the verdict's, when there is one
    resolves: tuple[str, ...]
    supersedes: tuple[str, ...]

    @classmethod
    def of(cls, record: Record) -> Card:
        return cls(
            record.id,
            record.title,
            record.status,
            record.created,
            record.concluded,
            tuple(record.tags),
            record.verdict.outcome if record.verdict else None,
            tuple(record.resolves),
            tuple(record.supersedes),
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["created"] = self.created.isoformat()
        data["concluded"] = self.concluded.isoformat() if self.concluded else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Card:
        return cls(
            data["id"],
            data["title"],
            Status(data["status"]),
            date.fromisoformat(data["created"]),
            date.fromisoformat(data["concluded"]) if data["concluded"] else None,
            tuple(data["tags"]),
            data["outcome"],
            tuple(data["resolves"]),
            tuple(data["supersedes"]),
        )


@dataclass(frozen=True)
class TaskState:
    """A plan task as the records say it stands."""

    done: bool
    record: Card | None = None  # the concluded record that resolves it
    superseded_by: Card | None = None  # when that record's evidence was replaced


def task_states(cards: Iterable[Card], plan: Plan) -> dict[str, TaskState]:
    """Which tasks of `plan` concluded records resolve, and which of those were superseded."""
    cards = sorted(cards, key=lambda c: (c.created, c.id))
    superseders = {old: card for card in cards for old in card.supersedes}
    states = {task.id: TaskState(False) for task in plan.tasks}
    for card in cards:
        for ref in card.resolves:
            plan_id, task_id = ref.split("#", 1)
            if plan_id != plan.id or task_id not in states:
                continue
            replaced = superseders.get(card.id)
            if card.status == Status.SUPERSEDED or replaced is not None:
                if not states[task_id].done:
                    states[task_id] = TaskState(False, card, replaced or card)
            elif card.status == Status.CONCLUDED:
                states[task_id] = TaskState(True, card)
    return states
