"""`kbgen diff`: the knowledge base loaded at two git revisions (or the working tree), compared.

`difference` exports each side (git), scans it, and compares the two (`diff.compare`); `output`
formats the result as a pull-request comment (Markdown, through `diff.md.j2`) or JSON.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbgen import redact
from kbgen.errors import InvalidHead, Problem
from kbgen.kb import documents, files, store
from kbgen.kb import git as gitrepo
from kbgen.kb import loading as kb
from kbgen.kb.cards import Card
from kbgen.kb.loading import KnowledgeBase
from kbgen.kb.models import Plan, Record
from kbgen.review.diff import COMMENT_MARKER, Difference, Side, compare, to_json

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

    Files that do not validate on the head side are an InvalidHead (an InvalidInput), located
    as `REV:path:line` for a revision: review valid evidence. The base side is history; files that
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
    folder = gitrepo.relative(root, records)
    with tempfile.TemporaryDirectory(prefix="kbgen-diff-") as scratch:
        new, new_root = _load_at(root, revs.head, records, Path(scratch) / "head")
        if new.problems:
            named = [_named(p, new_root, head_name) for p in new.problems]
            raise InvalidHead(named, base_name, head_name)
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
    blob = gitrepo.blob_id(files.read_regular(path, store.MAX_BYTES))
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
            i: documents.load_model(self.paths[i], Record)
            for i in sorted(wanted & self.paths.keys())
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
    """`kbgen diff`'s text: Markdown for a pull-request comment, or JSON.

    A head that does not validate is an InvalidHead; as Markdown, its `comment` says what is
    invalid (file, line, field), for the pull request to show instead of nothing.
    """
    try:
        result = difference(records, base, head, all_rows)
    except InvalidHead as exc:
        if fmt == "markdown":
            exc.comment = _comment(
                "diff-invalid.md.j2",
                templates,
                invalid=exc,
                problems=[_masked(p) for p in exc.problems],
            )
        raise
    if fmt == "json":
        return json.dumps(to_json(result), indent=2, ensure_ascii=False) + "\n"
    return _comment("diff.md.j2", templates, d=result)


def _comment(name: str, templates: Path | None, **context: Any) -> str:
    from kbgen.site import render

    # its first line marks the comment, so a CI job updates it in place
    marker = render.Markdown(COMMENT_MARKER)  # kbgen's own constant, printed as is
    return render.template(name, templates, marker=marker, **context)


def _masked(problem: Problem) -> Problem:
    """A problem with what looks like a secret masked, each part alone (as `kbgen` prints it)."""
    return dataclasses.replace(
        problem,
        path=Path(redact.text(str(problem.path))),
        field=redact.text(problem.field),
        message=redact.text(problem.message),
    )


def _load_at(
    root: Path, rev: str | None, records: Path, scratch: Path
) -> tuple[KnowledgeBase, Path | None]:
    """The knowledge base at `rev`, and the folder it was exported to (None: the files on disk)."""
    if rev is None:
        return kb.scan([records], comparable), None
    folder = gitrepo.export(root, rev, gitrepo.relative(root, records), scratch)
    return kb.scan([folder], comparable), scratch


def _named(problem: Problem, exported: Path | None, rev: str) -> Problem:
    """A problem in an exported revision, named `REV:path` instead of a temporary file."""
    if exported is None:
        return problem
    return dataclasses.replace(problem, path=Path(f"{rev}:{problem.path.relative_to(exported)}"))
