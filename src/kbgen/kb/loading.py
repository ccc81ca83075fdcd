"""The knowledge base as a whole: load every record and plan, validate each, check references.

A file is a plan when it sits in a folder named ``plans``, otherwise a record. Every problem is
reported, not just the first, each located as ``file:line: dotted.path: message``. Valid files
are parsed once by the fast loader; only a file with problems is parsed again with positions,
so validating a large, healthy knowledge base stays quick. `load` gives the models, `load_facts`
what validation needs (cached between runs), and `scan` what a caller's function makes of each
file, in the process that parsed it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbgen import __version__
from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files, replications, store
from kbgen.kb.models import Plan, Range, Record, Status, json_schemas
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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "refs": self.refs, "tasks": self.tasks}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Facts:
        refs = tuple((section, target) for section, target in data["refs"])
        return cls(data["kind"], data["id"], refs, tuple(data["tasks"]))


REF_SECTIONS = ("resolves", "supersedes", "related")


@dataclass(frozen=True)
class Known:
    """A valid file as `scan` sees it: its facts, and what `each` made of it (its product)."""

    facts: Facts
    product: Any


@dataclass
class KnowledgeBase:
    """Every valid file's facts and product, the file of each id, and every problem found.

    A file's product is its model with `load`, what `each` returned with `scan`, and None
    with `load_facts`; ``records`` and ``plans`` are the products that are models.
    """

    facts: dict[Path, Facts] = field(default_factory=dict)  # every valid file, ids unique
    products: dict[Path, Any] = field(default_factory=dict)  # every valid file, in file order
    paths: dict[tuple[str, str], Path] = field(default_factory=dict)  # (kind, id) -> file
    problems: list[Problem] = field(default_factory=list)
    # (kind, file stem) of files that failed: references to them are not reported as dangling,
    # since the file's own problems already say what is wrong
    broken: set[tuple[str, str]] = field(default_factory=set)

    @property
    def records(self) -> dict[str, Record]:
        return {doc.id: doc for doc in self.products.values() if isinstance(doc, Record)}

    @property
    def plans(self) -> dict[str, Plan]:
        return {doc.id: doc for doc in self.products.values() if isinstance(doc, Plan)}

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


def load_with_document(path: Path, model: type[M]) -> tuple[M, store.Document]:
    """A YAML file validated as `model`, and the round-trip document it was validated from
    (to fill in and save: `store.save` refuses if the file changed since this read)."""
    doc = store.load_document(path)
    try:
        return model.model_validate(store.plain(doc.data)), doc
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc, doc.data)) from exc


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


def load(paths: Iterable[Path]) -> KnowledgeBase:
    """Every record and plan under `paths` as models (``records``, ``plans``), cross-checked."""
    return scan(paths, _model)


def load_facts(paths: Iterable[Path], cache: Path | None = None) -> KnowledgeBase:
    """Every file under `paths` validated and cross-checked, keeping only ``facts`` (`kbgen
    validate`).

    The `cache` file, when given, remembers the facts of every valid file. Its key is kbgen's
    version and schema; a file's facts are trusted, and the file not even parsed, while its
    fingerprint (size, mtime, inode) is the one it had when it was read.
    """
    found = files.iter_yaml_files(paths)
    if cache is None:
        return _scan(found, _nothing, {}, references=True)
    remembered = files.FingerprintCache(cache, _rules_key())
    fingerprints = {path: files.fingerprint(path) for path in found}
    known = {}
    for path, fingerprint in fingerprints.items():
        value = remembered.get(path, fingerprint)
        if value is not None:
            known[path] = Known(Facts.from_json(value), None)
    kb = _scan(found, _nothing, known, references=True)
    for path, facts in kb.facts.items():
        if path not in known:
            remembered.put(path, fingerprints[path], facts.to_json())
    remembered.save()
    return kb


def scan(
    paths: Iterable[Path],
    each: Callable[[Record | Plan, Path], Any],
    *,
    known: Mapping[Path, Known] | None = None,
    references: bool = True,
) -> KnowledgeBase:
    """Every record and plan under `paths`, validated and cross-checked, each valid one handed
    to `each` (a picklable function) in the process that parsed it: what it returns is the
    file's product. Many files are parsed in parallel, one process per core.

    A file in `known` is not parsed: its facts and product are as given there (its caller's
    cache vouches for them). With ``references=False`` links between files are not checked
    (for a partial set of files).
    """
    return _scan(files.iter_yaml_files(paths), each, known or {}, references)


def _scan(
    found: list[Path],
    each: Callable[[Record | Plan, Path], Any],
    known: Mapping[Path, Known],
    references: bool,
) -> KnowledgeBase:
    kb = KnowledgeBase()
    parsed: dict[Path, Known] = {}
    todo = [path for path in found if path not in known]
    for path, result in _map(partial(_examine, each), todo):
        if isinstance(result, Known):
            parsed[path] = result
        else:
            kb.problems.extend(result)
            kb.broken.add(("plan" if kind_of(path) is Plan else "record", path.stem))
    for path in found:
        if (entry := known.get(path) or parsed.get(path)) is None:
            continue
        kb.products[path] = entry.product
        key = (entry.facts.kind, entry.facts.id)
        if key in kb.paths:
            message = f"{entry.facts.id!r} is also the id of {kb.paths[key]}"
            kb.problems.append(located(path, ["id"], message))
            continue
        kb.paths[key] = path
        kb.facts[path] = entry.facts
    if references:
        kb.problems.extend(_reference_problems(kb))
    return kb


def _model(doc: Record | Plan, path: Path) -> Record | Plan:
    return doc


def _nothing(doc: Record | Plan, path: Path) -> None:
    return None


def _examine(
    each: Callable[[Record | Plan, Path], Any], path: Path
) -> tuple[Path, Known | list[Problem]]:
    try:
        doc = load_file(path)
    except InvalidInput as exc:
        return path, exc.problems
    return path, Known(Facts.of(doc), each(doc, path))


R = TypeVar("R")


def _map(func: Callable[[Path], R], paths: list[Path]) -> Iterator[R]:
    workers = os.cpu_count() or 1
    if workers < 2 or len(paths) < PARALLEL_FROM:
        yield from map(func, paths)
        return
    # forkserver, not fork: forking a process that may hold threads is unsafe
    with ProcessPoolExecutor(
        workers,
        mp_context=get_context("forkserver"),
        initializer=_end_with,
        initargs=(os.getpid(),),
    ) as pool:
        yield from pool.map(func, paths, chunksize=max(16, len(paths) // (workers * 8)))


def _end_with(parent: int) -> None:
    """In each worker: end it when the process that started the pool ends, however it ends.

    A pool's workers wait for work on a pipe whose both ends they hold, so a parent killed
    with SIGKILL would leave them (and the forkserver, and the resource tracker, which live
    as long as a worker does) waiting for good. A daemon thread watches the parent and ends
    the worker the moment it is gone; the forkserver and the resource tracker then end by
    themselves, nobody holding their pipes open any more.
    """
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="end-with-parent").start()


WATCH_INTERVAL_S = 0.5  # how often a parent is looked at where it cannot be waited for


def _watch(parent: int) -> None:
    try:
        pidfd = os.pidfd_open(parent)  # Linux: readable once the process has ended
    except ProcessLookupError:
        os._exit(1)  # ended before this worker started
    except (AttributeError, OSError):  # no pidfd here: look from time to time
        while _alive(parent):
            time.sleep(WATCH_INTERVAL_S)
    else:
        waiting = select.poll()
        waiting.register(pidfd, select.POLLIN)
        waiting.poll()
    os._exit(1)  # no cleanup to do: the pages are written atomically


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:  # gone, or its number taken by someone else's process
        return False
    return True


FACTS_FORMAT = 5  # of `Facts.to_json` and the products in it (3: lint_facts finds secrets; 4:
# a Card's metric and effects; 5: lint_facts' card): bump it when they change, so older caches
# are ignored


def _rules_key() -> str:
    """Changes whenever kbgen, its schema or the cached facts' format does."""
    schema = json.dumps(json_schemas(), sort_keys=True)
    text = f"{FACTS_FORMAT}\n{replications.RULE}\n{__version__}\n{schema}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
class ClassResult:
    """One prompt class's verdict on a card: its outcome and the primary metric's relative
    change, with its 95% interval when there is one."""

    cls: str
    outcome: str
    effect: float
    interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class Card:
    """What plan pages, indexes and the replication rules need of a record: small, so it
    crosses processes cheaply."""

    id: str
    title: str
    status: Status
    created: date
    concluded: date | None
    tags: tuple[str, ...]
    outcome: str | None  # the verdict's, when there is one
    resolves: tuple[str, ...]
    supersedes: tuple[str, ...]
    results: tuple[ClassResult, ...] = ()  # per class, in the verdict's order
    metric: str | None = None  # the hypothesis' primary metric
    statement: str | None = None  # the hypothesis (Markdown)
    variant: str | None = None  # the arm judged against the baseline
    acceptance: tuple[float, float] | None = None  # its draft acceptance rate (low, high)
    decision: str | None = None  # Markdown
    consequences: str | None = None  # Markdown
    engine_version: str | None = None
    question: str | None = None  # `replications.question_of`'s key
    question_label: str | None = None
    question_detail: str | None = None  # the common settings, to tell two labels apart

    @property
    def classes(self) -> tuple[tuple[str, str], ...]:
        """(class, outcome) pairs: disagreement between classes stays visible."""
        return tuple((r.cls, r.outcome) for r in self.results)

    @property
    def effects(self) -> tuple[float, ...]:
        return tuple(r.effect for r in self.results)

    @classmethod
    def of(cls, record: Record) -> Card:
        verdict, config = record.verdict, record.config
        question = replications.question_of(record)
        return cls(
            record.id,
            record.title,
            record.status,
            record.created,
            record.concluded,
            tuple(record.tags),
            verdict.outcome if verdict else None,
            tuple(record.resolves),
            tuple(record.supersedes),
            tuple(
                ClassResult(
                    c,
                    str(v.outcome),
                    v.effect,
                    None if v.ci_low is None or v.ci_high is None else (v.ci_low, v.ci_high),
                )
                for c, v in verdict.per_class.items()
            )
            if verdict
            else (),
            record.hypothesis.primary_metric if record.hypothesis else None,
            record.hypothesis.statement if record.hypothesis else None,
            verdict.variant if verdict else None,
            _acceptance(record),
            record.decision,
            record.consequences,
            config.engine.version if config else None,
            question[0] if question else None,
            question[1] if question else None,
            question[2] if question else None,
        )

    @functools.cached_property
    def digest(self) -> str:
        """Changes whenever anything on the card does (a page that shows it is then stale)."""
        text = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["created"] = self.created.isoformat()
        data["concluded"] = self.concluded.isoformat() if self.concluded else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Card:
        return cls(
            **{
                **data,
                "status": Status(data["status"]),
                "created": date.fromisoformat(data["created"]),
                "concluded": date.fromisoformat(data["concluded"]) if data["concluded"] else None,
                "results": tuple(
                    ClassResult(
                        r["cls"],
                        r["outcome"],
                        r["effect"],
                        tuple(r["interval"]) if r["interval"] is not None else None,
                    )
                    for r in data["results"]
                ),
                "acceptance": tuple(data["acceptance"]) if data["acceptance"] else None,
                **{k: tuple(data[k]) for k in ("tags", "resolves", "supersedes")},
            }
        )


def _acceptance(record: Record) -> tuple[float, float] | None:
    """The judged variant's draft acceptance rate, as (low, high): equal for one number."""
    if record.verdict is None or (stats := record.spec_decode.get(record.verdict.variant)) is None:
        return None
    rate = stats.acceptance_rate
    if rate is None:
        return None
    return (rate.low, rate.high) if isinstance(rate, Range) else (rate, rate)


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
