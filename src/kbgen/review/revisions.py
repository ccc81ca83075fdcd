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

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbgen.errors import InvalidInput, Problem, UsageError
from kbgen.kb import git as gitrepo
from kbgen.kb import loading as kb
from kbgen.kb.loading import Card, KnowledgeBase
from kbgen.kb.models import Plan, Record
from kbgen.kb.problems import located
from kbgen.review.diff import COMMENT_MARKER, Difference, Side, compare, to_json
from kbgen.site import build

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

    Files that do not validate on the head side are an InvalidInput, located as
    `REV:path:line` for a revision: review valid evidence. The base side is history; files that
    do not validate there on their own are left out, with a warning, so they do not pass for new
    records.

    The head is read in full, each file made `comparable` in the process that parses it (a card or a
    plan, and the file's git blob id). At the base only the files whose blob differs from the
    head's file at the same place are read; every other file is the head's, byte for byte. Full
    models are loaded only for the records that differ and those they supersede.
    """
    root, revs = resolve(records, base, head)
    base_name = gitrepo.short(root, revs.base)
    head_name = WORKING_TREE if revs.head is None else gitrepo.short(root, revs.head)
    folder = _inside(root, records)
    with tempfile.TemporaryDirectory(prefix="kbgen-diff-") as scratch:
        new, new_root = _load_at(root, revs.head, records, Path(scratch) / "head")
        if new.problems:
            raise InvalidInput([_named(p, new_root, head_name) for p in new.problems])
        head_files = {  # repository-relative name -> (path, product)
            (
                f"{folder}/{path.relative_to(records).as_posix()}"
                if new_root is None
                else path.relative_to(new_root).as_posix()
            ): (path, product)
            for path, product in new.products.items()
        }
        base_blobs = {
            n: b for n, b in gitrepo.blobs_at(root, revs.base, folder).items() if _listed(n)
        }
        same = {
            n
            for n, blob in base_blobs.items()
            if n in head_files and head_files[n][1]["blob"] == blob
        }
        exported = gitrepo.export(
            root, revs.base, folder, Path(scratch) / "base", base_blobs.keys() - same
        )
        old = kb.scan([exported], comparable, references=False)
        skipped = sorted(
            {str(_named(p, Path(scratch) / "base", base_name).path) for p in old.problems}
        )
        base_products = {**old.products, **{head_files[n][0]: head_files[n][1] for n in same}}
        base_side, head_side = _side(base_name, base_products), _side(head_name, new.products)
        differ = {
            record_id
            for record_id in base_side.blobs.keys() | head_side.blobs.keys()
            if base_side.blobs.get(record_id) != head_side.blobs.get(record_id)
        }
        superseded = {
            target
            for side in (base_side, head_side)
            for record_id in differ & side.cards.keys()
            for target in side.cards[record_id].supersedes
        }
        sides = [side.with_models(differ | superseded) for side in (base_side, head_side)]
    result = compare(sides[0], sides[1], all_rows)
    notes = [f"`{path}` does not validate: left out of the base" for path in skipped]
    return dataclasses.replace(result, warnings=notes + result.warnings)


def _listed(name: str) -> bool:
    """Whether `files.iter_yaml_files` would list this repository path (hidden parts skipped)."""
    parts = name.split("/")
    return name.endswith((".yaml", ".yml")) and not any(p.startswith(".") for p in parts)


def comparable(doc: Record | Plan, path: Path) -> dict[str, Any]:
    """For `kb.scan`: what a comparison needs of a file — a plan's data or a record's card, with
    the file's git blob id."""
    blob = gitrepo.blob_id(path.read_bytes())
    if isinstance(doc, Plan):
        return {"plan": doc.model_dump(mode="json"), "blob": blob}
    return {"card": Card.of(doc).to_json(), "blob": blob}


@dataclass(frozen=True)
class _Loaded:
    """One side as `comparable` read it: cards, blob ids and plans; record models on request."""

    name: str
    cards: dict[str, Card]
    blobs: dict[str, str]
    paths: dict[str, Path]
    plans: dict[str, Plan]

    def with_models(self, wanted: set[str]) -> Side:
        records = {
            i: kb.load_model(self.paths[i], Record) for i in sorted(wanted & self.paths.keys())
        }
        return Side(self.name, self.cards, records, self.plans)


def _side(name: str, products: dict[Path, dict[str, Any]]) -> _Loaded:
    side = _Loaded(name, {}, {}, {}, {})
    for path, product in products.items():
        if "plan" in product:
            plan = Plan.model_validate(product["plan"])
            side.plans[plan.id] = plan
            continue
        record_id = product["card"]["id"]
        side.cards[record_id] = Card.from_json(product["card"])
        side.blobs[record_id], side.paths[record_id] = product["blob"], path
    return side


def output(
    records: Path,
    base: str | None,
    head: str | None,
    all_rows: bool,
    fmt: str,
    templates: Path | None = None,
) -> str:
    """`kbgen diff`'s text: Markdown for a pull-request comment, or JSON."""
    result = difference(records, base, head, all_rows)
    if fmt == "json":
        return json.dumps(to_json(result), indent=2, ensure_ascii=False) + "\n"
    from kbgen.site import render

    # its first line marks the comment, so a CI job updates it in place
    return render.template("diff.md.j2", templates, d=result, marker=COMMENT_MARKER)


def _load_at(
    root: Path, rev: str | None, records: Path, scratch: Path
) -> tuple[KnowledgeBase, Path | None]:
    """The knowledge base at `rev`, and the folder it was exported to (None: the files on disk)."""
    if rev is None:
        return kb.scan([records], comparable), None
    folder = gitrepo.export(root, rev, _inside(root, records), scratch)
    return kb.scan([folder], comparable), scratch


def _inside(root: Path, path: Path) -> str:
    """`path` relative to the repository root, as git names it (the folder's symbolic links
    resolved first); UsageError for a path outside the repository."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError as exc:
        raise UsageError(f"{path}: not inside the git repository {root}") from exc


def _named(problem: Problem, exported: Path | None, rev: str) -> Problem:
    """A problem in an exported revision, named `REV:path` instead of a temporary file."""
    if exported is None:
        return problem
    return dataclasses.replace(problem, path=Path(f"{rev}:{problem.path.relative_to(exported)}"))


@dataclass(frozen=True)
class Report:
    problems: list[Problem]
    notes: list[str]  # what could not be checked, and why


@dataclass(frozen=True)
class Fork:
    """Where this branch left the main branch, for the lints that compare with it."""

    root: Path
    branch: str
    commit: str


def check(
    records: Path,
    docs: Path,
    templates: Path | None = None,
    main: str | None = None,
    every_record: bool = False,
) -> Report:
    """Validate, compare docs/ with a fresh render, and lint; every problem found.

    Recomputing a record's numbers from its samples runs a bootstrap per class (about a second
    a record), so in git it is done for the records this branch changed since it forked from
    the main branch, unless `every_record`; outside git, for every record.
    """
    base = kb.scan([records], lint_facts)
    if base.problems:
        return Report(base.problems, ["docs/ and lints not checked until every file is valid"])
    stale = build.render_site(records, docs, templates, check=True)
    problems = [Problem(docs / rel, None, "", "stale: run `kbgen render`") for rel in stale]
    fork, notes = _fork(records, main)
    changed = None if fork is None or every_record else _changed_since(fork, records, base)
    problems += lint(base, docs, changed)
    if fork is not None:
        problems += id_collisions(base, records, fork)
        if changed is not None:
            notes.append(
                f"numbers recomputed from samples for the {len(changed)} record file(s) changed "
                f"since this branch left {fork.branch}; --every-record for all"
            )
    return Report(sorted(problems), notes)


def _fork(records: Path, main: str | None) -> tuple[Fork | None, list[str]]:
    """The fork point from the main branch, or None with a note saying why there is none.

    A `main` named explicitly must exist: a typo must not pass for a clean check.
    """
    try:
        root = gitrepo.toplevel(records)
    except UsageError as exc:
        return None, [f"not compared with a main branch: {exc}"]
    if main is not None:
        gitrepo.commit_of(root, main)  # UsageError for a revision that does not exist
    branch = main or gitrepo.main_branch(root)
    if branch is None:
        return None, ["not compared with a main branch: none found (origin/HEAD, main, master)"]
    return Fork(root, branch, gitrepo.merge_base(root, branch, "HEAD")), []


def _changed_since(fork: Fork, records: Path, base: KnowledgeBase) -> set[Path]:
    """Record files whose YAML or samples file differ from the fork point (uncommitted
    included)."""
    names = gitrepo.changed_files(fork.root, fork.commit, _inside(fork.root, records))
    changed = {(fork.root / name).resolve() for name in names}
    found = set()
    for (kind, _), path in base.paths.items():
        if kind != "record":
            continue
        samples = base.products[path].get("samples")
        if path.resolve() in changed or (
            samples is not None and (path.parent / samples).resolve() in changed
        ):
            found.add(path)
    return found


def lint_facts(doc: Record | Plan, path: Path) -> dict[str, Any]:
    """For `kb.scan`: what the lints need of one file, found where it was parsed."""
    facts: dict[str, Any] = {"links": [[loc, target] for loc, target in _links(doc)]}
    if isinstance(doc, Record):
        facts["samples"] = doc.raw_samples.path if doc.raw_samples else None
        facts["measured"] = doc.provenance is not None and doc.provenance.source == "measured"
    return facts


def lint(base: KnowledgeBase, docs: Path, changed: set[Path] | None = None) -> list[Problem]:
    """Dangling links, missing samples and hand-edited numbers in a knowledge base scanned with
    `lint_facts` and valid.

    Numbers are recomputed for the record files in `changed` (None: every record).
    """
    from kbgen.record import check as record_check

    pages = {"records/index.md", "plans/index.md"}
    pages |= {f"{kind}s/{doc_id}.md" for kind, doc_id in base.paths}
    problems = []
    for (kind, _), path in sorted(base.paths.items()):
        facts = base.products[path]
        for loc, target in facts["links"]:
            page = os.path.normpath(os.path.join(f"{kind}s", target))
            if page not in pages and not (docs / page).is_file():
                message = f"links to {target!r}, a page that does not exist"
                problems.append(located(path, loc, message))
        if kind != "record":
            continue
        if facts["samples"] is not None:
            samples = path.parent / facts["samples"]
            if not samples.exists():
                message = f"{samples.name} is missing (not committed?)"
                problems.append(located(path, ["raw_samples", "path"], message))
            elif changed is None or path in changed:
                problems += record_check.check(path)
        elif facts["measured"]:
            problems.append(located(path, ["raw_samples"], "a measured record without its samples"))
    return problems


_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")


def _links(doc: Record | Plan) -> Iterator[tuple[list[str | int], str]]:
    """(field, target) of every relative link to a Markdown page in the Markdown fields."""
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
            page = target.split("#", 1)[0]
            if ":" not in page and page.endswith(".md") and not page.startswith("/"):
                yield loc, page


def id_collisions(base: KnowledgeBase, records: Path, fork: Fork) -> list[Problem]:
    """Record ids added both here and on the main branch since they forked."""
    folder = _inside(fork.root, records)
    before = _ids_at(fork.root, fork.commit, folder)
    theirs = _ids_at(fork.root, fork.branch, folder) - before
    problems = []
    for (kind, doc_id), path in sorted(base.paths.items()):
        if kind != "record" or doc_id not in theirs or doc_id in before:
            continue
        if path.read_bytes() != gitrepo.show(fork.root, fork.branch, _inside(fork.root, path)):
            message = f"{fork.branch} also added a record {doc_id!r} since this branch forked"
            problems.append(located(path, ["id"], message + ": rename one of them"))
    return problems


def _ids_at(root: Path, rev: str, folder: str) -> set[str]:
    """Ids of the records under `folder` at `rev` (a record's id is its file name)."""
    found = set()
    for name in gitrepo.files_at(root, rev, folder):
        path = Path(name)
        if path.suffix in (".yaml", ".yml") and kb.kind_of(path) is Record:
            found.add(path.stem)
    return found
