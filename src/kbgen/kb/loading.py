"""The knowledge base as a whole: load every record and plan, validate each, check references.

`load` gives the models, `load_facts` what validation needs (cached between runs), `scan` what a
caller's function makes of each file. See docs/design.md, "Loading the knowledge base".
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kbgen import __version__
from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files, pool, questions
from kbgen.kb.documents import kind_of, load_file
from kbgen.kb.models import Plan, Record, json_schemas
from kbgen.kb.problems import located


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
    listed: list[Path] | None = None,
) -> KnowledgeBase:
    """Every record and plan under `paths`, validated and cross-checked, each valid one handed
    to `each` (a picklable function) in the process that parsed it: what it returns is the
    file's product. Many files are parsed in parallel, one process per core.

    A file in `known` is not parsed: its facts and product are as given there (its caller's
    cache vouches for them). With ``references=False`` links between files are not checked
    (for a partial set of files). `listed`: the files under `paths`, where the caller has
    listed them already (`files.iter_yaml_files`).
    """
    found = files.iter_yaml_files(paths) if listed is None else listed
    return _scan(found, each, known or {}, references)


def _scan(
    found: list[Path],
    each: Callable[[Record | Plan, Path], Any],
    known: Mapping[Path, Known],
    references: bool,
) -> KnowledgeBase:
    kb = KnowledgeBase()
    parsed: dict[Path, Known] = {}
    todo = [path for path in found if path not in known]
    for path, result in pool.map_paths(partial(_examine, each), todo):
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


FACTS_FORMAT = 8  # of `Facts.to_json` and the products in it, a Card among them: bump it when
# they change, so older caches are ignored


def _rules_key() -> str:
    """Changes whenever kbgen, its schema or the cached facts' format does."""
    schema = json.dumps(json_schemas(), sort_keys=True)
    text = f"{FACTS_FORMAT}\n{questions.RULE}\n{__version__}\n{schema}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def problems_if_written(path: Path, doc: Record | Plan, tree: Any, root: Path) -> list[Problem]:
    """What validating `root` with `path` would report at `path` were `doc` (parsed as `tree`)
    the file there: an id another file has, a reference to a plan task or record that does not
    exist. Only the files these can involve are read: those named like the id or a target."""
    facts = Facts.of(doc)
    named = {facts.id} | {target.split("#", 1)[0] for _, target in facts.refs}
    found = files.iter_yaml_files([root]) if root.is_dir() else []
    others = [other for other in found if other.stem in named and _entry(other) != _entry(path)]
    kb = _scan(others, _nothing, {}, references=False)
    key, problems = (facts.kind, facts.id), list[Problem]()
    if key in kb.paths:
        message = f"{facts.id!r} is also the id of {kb.paths[key]}"
        problems.append(located(path, ["id"], message, tree))
    kb.paths[key], kb.facts[path] = path, facts
    return problems + [located(path, at, said, tree) for _, at, said in _dangling(kb, [path])]


def _entry(path: Path) -> str:
    """What a write at `path` replaces, however its folder is reached (a symlink, not its file)."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def _reference_problems(kb: KnowledgeBase) -> list[Problem]:
    return [located(path, loc, message) for path, loc, message in _dangling(kb, kb.facts)]


def _dangling(
    kb: KnowledgeBase, paths: Iterable[Path]
) -> Iterator[tuple[Path, list[str | int], str]]:
    """(file, field, message) of each reference of the files `paths` to a plan task or record
    that `kb` does not hold (references to files that failed are not reported)."""
    tasks = {f.id: set(f.tasks) for f in kb.facts.values() if f.kind == "plan"}
    records = {f.id for f in kb.facts.values() if f.kind == "record"}
    for path in paths:
        position: dict[str, int] = {}
        for section, ref in kb.facts[path].refs:
            i = position[section] = position.get(section, -1) + 1
            if section == "resolves":
                plan_id, task_id = ref.split("#", 1)
                if ("plan", plan_id) in kb.broken:
                    continue
                if plan_id not in tasks:
                    yield path, [section, i], f"no plan {plan_id!r}"
                elif task_id not in tasks[plan_id]:
                    yield path, [section, i], f"plan {plan_id!r} has no task {task_id!r}"
            elif ref not in records and ("record", ref) not in kb.broken:
                yield path, [section, i], f"no record {ref!r}"
