"""`kbgen diff` and `kbgen check`: records reviewed in pull requests like code.

`difference` loads the knowledge base at two revisions (git) or from the working tree and
compares them (`diff.compare`). `check` is everything a reviewer's CI should refuse: invalid
files, a stale `docs/`, and the lint classes below, one located problem per line.

Lint classes:
- ``id-collision``: a record id this branch adds that the main branch also added since the two
  forked (they would clash on merge);
- ``dangling-link``: a Markdown link in a record or plan to a record or plan page that does not
  exist;
- ``missing-samples``: a measured record without its raw samples file;
- ``hand-edited``: a record whose numbers no longer follow from its samples (`record.check`).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbgen import build, gitrepo, kb, store
from kbgen.diff import Difference, compare
from kbgen.errors import InvalidInput, Problem
from kbgen.kb import KnowledgeBase
from kbgen.models import Plan, Record

WORKING_TREE = "working tree"


@dataclass(frozen=True)
class Revisions:
    base: str  # a commit
    head: str | None  # a commit, or None for the working tree


def resolve(records: Path, base: str | None, head: str | None) -> tuple[Path, Revisions]:
    """The repository root and the two sides: by default, the fork point from the main branch
    against the working tree."""
    root = gitrepo.toplevel(records)
    base_commit = gitrepo.commit_of(root, base) if base else gitrepo.default_base(root)
    head_commit = gitrepo.commit_of(root, head) if head else None
    return root, Revisions(base_commit, head_commit)


def difference(
    records: Path, base: str | None = None, head: str | None = None, all_rows: bool = False
) -> Difference:
    """The knowledge base under `records` at `base` compared with `head` (or the working tree).

    Files that do not validate on the head side are an InvalidInput: review valid evidence.
    The base side is history; its invalid files are left out.
    """
    root, revs = resolve(records, base, head)
    with tempfile.TemporaryDirectory(prefix="kbgen-diff-") as scratch:
        old = _load_at(root, revs.base, records, Path(scratch) / "base")
        new = _load_at(root, revs.head, records, Path(scratch) / "head")
    if new.problems:
        raise InvalidInput(new.problems)
    head_name = WORKING_TREE if revs.head is None else gitrepo.short(root, revs.head)
    return compare(old, new, gitrepo.short(root, revs.base), head_name, all_rows)


def _load_at(root: Path, rev: str | None, records: Path, scratch: Path) -> KnowledgeBase:
    if rev is None:
        return kb.load([records])
    relative = records.absolute().relative_to(root).as_posix()
    return kb.load([gitrepo.export(root, rev, relative, scratch)])


@dataclass(frozen=True)
class Report:
    problems: list[Problem]
    notes: list[str]  # what could not be checked, and why


def check(
    records: Path, docs: Path, templates: Path | None = None, main: str | None = None
) -> Report:
    """Validate, compare docs/ with a fresh render, and lint; every problem found."""
    base = kb.load([records])
    if base.problems:
        return Report(base.problems, ["docs/ and lints not checked until every file is valid"])
    stale = build.render_site(records, docs, templates, check=True)
    problems = [Problem(docs / rel, None, "", "stale: run `kbgen render`") for rel in stale]
    problems += lint(base)
    collisions, notes = id_collisions(base, records, main)
    return Report(sorted(problems + collisions), notes)


def lint(base: KnowledgeBase) -> list[Problem]:
    """Dangling links, missing samples and hand-edited numbers in a valid knowledge base."""
    from kbgen import record as record_stage

    problems = []
    docs: list[Record | Plan] = [*base.records.values(), *base.plans.values()]
    pages = {doc.id for doc in docs}
    for doc in docs:
        path = base.path_of(doc)
        for loc, target in _links(doc):
            if target not in pages:
                problems.append(_at(path, loc, f"links to {target!r}, which is no record or plan"))
    for record in base.records.values():
        path = base.path_of(record)
        if record.raw_samples is not None:
            samples = path.parent / record.raw_samples.path
            if not samples.exists():
                problems.append(
                    _at(
                        path, ["raw_samples", "path"], f"{samples.name} is missing (not committed?)"
                    )
                )
                continue
            problems += record_stage.check(path)
        elif record.provenance is not None and record.provenance.source == "measured":
            problems.append(_at(path, ["raw_samples"], "a measured record without its samples"))
    return problems


_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
_PAGE = re.compile(r"(?:^|/)([a-z0-9][a-z0-9-]*)\.(?:md|ya?ml)(?:#.*)?$")


def _links(doc: Record | Plan) -> Iterator[tuple[list[str | int], str]]:
    """(field, target id) of every relative link to a page or YAML file in Markdown fields."""
    data = doc.model_dump(include={"context", "hypothesis", "verdict", "decision", "consequences"})
    texts: list[tuple[list[str | int], Any]] = [
        (["context"], data.get("context")),
        (["hypothesis", "statement"], (data.get("hypothesis") or {}).get("statement")),
        (["verdict", "rationale"], (data.get("verdict") or {}).get("rationale")),
        (["decision"], data.get("decision")),
        (["consequences"], data.get("consequences")),
    ]
    for loc, text in texts:
        for target in _LINK.findall(text or ""):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            match = _PAGE.search(target)
            if match and match.group(1) != "index":
                yield loc, match.group(1)


def _at(path: Path, loc: list[str | int], message: str) -> Problem:
    line, found = store.line_of(store.load_document(path).data, loc)
    return Problem(path, line, kb.dotted(found), message)


def id_collisions(
    base: KnowledgeBase, records: Path, main: str | None
) -> tuple[list[Problem], list[str]]:
    """Record ids added both here and on the main branch since they forked."""
    from kbgen.errors import UsageError

    try:
        root = gitrepo.toplevel(records)
        branch = main or gitrepo.main_branch(root)
        if branch is None:
            return [], ["id collisions not checked: no main branch (origin/HEAD, main, master)"]
        fork = gitrepo.merge_base(root, branch, "HEAD")
    except UsageError as exc:
        return [], [f"id collisions not checked: {exc}"]
    relative = records.absolute().relative_to(root).as_posix()
    before = _ids_at(root, fork, relative)
    theirs = _ids_at(root, branch, relative) - before
    problems = []
    for (kind, doc_id), path in sorted(base.paths.items()):
        if kind == "record" and doc_id in theirs and doc_id not in before:
            ours = path.read_bytes()
            if ours != gitrepo.show(root, branch, path.absolute().relative_to(root).as_posix()):
                message = f"{branch} also added a record {doc_id!r} since this branch forked"
                problems.append(_at(path, ["id"], message + ": rename one of them"))
    return problems, []


def _ids_at(root: Path, rev: str, folder: str) -> set[str]:
    """Ids of the records under `folder` at `rev` (a record's id is its file name)."""
    found = set()
    for name in gitrepo.files_at(root, rev, folder):
        path = Path(name)
        if path.suffix in (".yaml", ".yml") and kb.kind_of(path) is Record:
            found.add(path.stem)
    return found
