"""`kbgen check`: everything a reviewer's CI should refuse, one located problem per line.

`verify` validates every file, compares `docs/` with a fresh render, and lints: id collisions
with the main branch, dangling links, missing samples, hand-edited numbers, and contradictions
(a warning, a problem with `strict`). What each means: docs/review.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from kbgen import redact
from kbgen.errors import InvalidInput, Problem, UsageError
from kbgen.kb import cards, documents, files, replications, store
from kbgen.kb import git as gitrepo
from kbgen.kb import loading as kb
from kbgen.kb.loading import KnowledgeBase
from kbgen.kb.models import Plan, Record
from kbgen.kb.problems import dotted, located
from kbgen.site import build


@dataclass(frozen=True)
class Report:
    problems: list[Problem]
    notes: list[str]  # what could not be checked, and why
    warnings: list[Problem] = field(default_factory=list)  # worth a look, not refused


@dataclass(frozen=True)
class Fork:
    """Where this branch left the main branch, for the lints that compare with it."""

    root: Path
    branch: str
    commit: str


def verify(
    records: Path,
    docs: Path,
    templates: Path | None = None,
    main: str | None = None,
    every_record: bool = False,
    strict: bool = False,
    cache: Path | None = None,
) -> Report:
    """Validate, compare docs/ with a fresh render, and lint; every problem found. Records
    that contradict each other are warnings, or problems when `strict`.

    The `cache` file, when given, remembers what each valid file gave the lints (`lint_facts`,
    and the lines its contradictions are reported at): a file is parsed again only once its
    fingerprint changed, as `kbgen validate`'s cache does.

    Recomputing a record's numbers from its samples runs a bootstrap per class (about a second
    a record), so in git it is done for the records this branch changed since it forked from
    the main branch, unless `every_record`; outside git, for every record.
    """
    inputs = {path: files.fingerprint(path) for path in files.iter_yaml_files([records])}
    remembered = None if cache is None else files.FingerprintCache(cache, _cache_key())
    known = {} if remembered is None else _trusted(remembered, inputs)
    base = kb.scan([records], lint_facts, known=known, listed=list(inputs))
    fresh = {path for path in base.facts if path not in known}  # to remember
    if base.problems:
        _remember(remembered, base, inputs, fresh)
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
                f"numbers recomputed from samples for the {len(changed)} record file(s) whose "
                f"numbers or samples changed since this branch left {fork.branch}; "
                "--every-record for all"
            )
    disagreements = contradictions(base, fresh)
    _remember(remembered, base, inputs, fresh)
    if strict:
        return Report(sorted(problems + disagreements), notes)
    return Report(sorted(problems), notes, disagreements)


CACHE_FORMAT = 1  # of `_remember`'s entries (`lint_facts` and "lines"): bump it when they change


def _cache_key() -> str:
    """Changes whenever kbgen's code (its schema with it), Pydantic or the entries' format do:
    not the schema itself, which takes a quarter of a second to generate."""
    return f"{CACHE_FORMAT}:{pydantic.VERSION}:{build.code_key(None)}"


def _trusted(
    remembered: files.FingerprintCache, inputs: dict[Path, files.Fingerprint]
) -> dict[Path, kb.Known]:
    """The files whose remembered entry holds: unchanged since it was written."""
    known = {}
    for path, fingerprint in inputs.items():
        entry = remembered.get(path, fingerprint)
        if entry is not None:
            known[path] = kb.Known(kb.Facts.from_json(entry["facts"]), entry["lint"])
    return known


def _remember(
    remembered: files.FingerprintCache | None,
    base: KnowledgeBase,
    inputs: dict[Path, files.Fingerprint],
    paths: set[Path],
) -> None:
    """The entries of `paths` (files of `base`, valid) written into the cache, and it saved."""
    if remembered is None:
        return
    for path in paths & set(base.facts):
        entry = {"facts": base.facts[path].to_json(), "lint": base.products[path]}
        remembered.put(path, inputs[path], entry)
    remembered.save()


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
    """Record files whose numbers may differ from the fork point's (uncommitted included): their
    samples file changed, or their YAML did other than in the author's words (`_same_numbers`)."""
    names = gitrepo.changed_files(fork.root, fork.commit, gitrepo.relative(fork.root, records))
    changed = {(fork.root / name).resolve() for name in names}
    found = set()
    for (kind, _), path in base.paths.items():
        if kind != "record":
            continue
        samples = base.products[path].get("samples")
        resampled = samples is not None and (path.parent / samples).resolve() in changed
        if resampled or (path.resolve() in changed and not _same_numbers(fork, path)):
            found.add(path)
    return found


def _same_numbers(fork: Fork, path: Path) -> bool:
    """Whether a record's file holds what the fork point's did in all its recomputation reads
    (`recompute.inputs`): a title, a decision or a rationale edited recompute nothing, as the
    numbers on the main branch were checked there."""
    from kbgen.record import recompute

    before = gitrepo.show(fork.root, fork.commit, gitrepo.relative(fork.root, path))
    if before is None:
        return False  # new here
    try:
        old = store.plain_of_text(before.decode("utf-8"), path)
        now = store.load_fast(path)
    except (InvalidInput, UnicodeDecodeError):
        return False
    return recompute.inputs(old) == recompute.inputs(now)


def lint_facts(doc: Record | Plan, path: Path) -> dict[str, Any]:
    """For `kb.scan`: what the lints need of one file, found where it was parsed."""
    facts: dict[str, Any] = {"links": [[loc, target] for loc, target in _links(doc)]}
    facts["secrets"] = redact.found(doc.model_dump(mode="json", exclude_unset=True))
    if isinstance(doc, Record):
        facts["card"] = cards.Card.of(doc).to_json()
        facts["samples"] = doc.raw_samples.path if doc.raw_samples else None
        facts["measured"] = (  # a step of work has no samples: it measured no arms
            doc.provenance is not None and doc.provenance.source == "measured" and not doc.step
        )
    return facts


def lint(base: KnowledgeBase, docs: Path, changed: set[Path] | None = None) -> list[Problem]:
    """Dangling links, secrets, missing samples and hand-edited numbers in a knowledge base
    scanned with `lint_facts` and valid.

    Numbers are recomputed for the record files in `changed` (None: every record).
    """
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
        for loc in facts["secrets"]:
            message = "looks like a secret (a key, token or password): remove it, it is published"
            problems.append(located(path, loc, message))
        if kind != "record":
            continue
        if facts["samples"] is not None:
            samples = path.parent / facts["samples"]
            if not samples.exists():
                message = f"{samples.name} is missing (not committed?)"
                problems.append(located(path, ["raw_samples", "path"], message))
            elif changed is None or path in changed:
                from kbgen.record import recompute  # heavy: only where numbers are recomputed

                problems += recompute.recompute(path)
        elif facts["measured"]:
            problems.append(located(path, ["raw_samples"], "a measured record without its samples"))
    return problems


def contradictions(base: KnowledgeBase, learned: set[Path] | None = None) -> list[Problem]:
    """One problem per contradiction in a knowledge base scanned with `lint_facts`, at the newer
    record's verdict for the class, naming the older record.

    A file's lines are looked up once and kept in its product ("lines"), so a cached product
    locates its contradictions without parsing the file again; the files whose product gained
    lines are added to `learned` (to be remembered).
    """
    known = [
        cards.Card.from_json(facts["card"]) for facts in base.products.values() if "card" in facts
    ]
    paths = {doc_id: path for (kind, doc_id), path in base.paths.items() if kind == "record"}
    found, trees = [], dict[Path, Any]()
    for c in replications.evidence(known).contradictions:
        older, newer = c.older, c.newer
        at: list[str | int] = ["verdict", "per_class", c.cls] if c.cls else ["verdict"]
        where = f"class {c.cls}" if c.cls else "its verdict"
        if newer.cell:  # a sweep's cell: at its cells, the cell named
            at, where = ["verdict", "cells"], f"{newer.cell}, {where}"
        named = f"{older.id} ({paths[older.id]})" + (f" at {older.cell}" if older.cell else "")
        message = (
            f"contradicts {named} in {where} ({older.id} vs this "
            f"record: {c.why}); re-measure, or mark one superseded"
        )
        path = paths[newer.id]
        line, dotted_at = _line(base, path, at, trees)
        if learned is not None and path not in learned and trees.get(path) is not None:
            learned.add(path)
        found.append(Problem(path, line, dotted_at, message))
    return found


def _line(
    base: KnowledgeBase, path: Path, at: list[str | int], trees: dict[Path, Any]
) -> tuple[int | None, str]:
    """The line of `at` in `path` and its dotted name, as `located` gives them: from the lines
    its product keeps, else from the file, parsed once (`trees`) and the line kept."""
    lines = base.products[path].setdefault("lines", {})
    key = json.dumps(at)
    if key not in lines:
        if path not in trees:
            trees[path] = store.positions(path)
        line, found = store.line_of(trees[path], at)
        lines[key] = [line, dotted(found)]
    line, dotted_at = lines[key]
    return line, dotted_at


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
    folder = gitrepo.relative(fork.root, records)
    before = _ids_at(fork.root, fork.commit, folder)
    theirs = _ids_at(fork.root, fork.branch, folder) - before
    problems = []
    for (kind, doc_id), path in sorted(base.paths.items()):
        if kind != "record" or doc_id not in theirs or doc_id in before:
            continue
        if files.read_regular(path, store.MAX_BYTES) != gitrepo.show(
            fork.root, fork.branch, gitrepo.relative(fork.root, path)
        ):
            message = f"{fork.branch} also added a record {doc_id!r} since this branch forked"
            problems.append(located(path, ["id"], message + ": rename one of them"))
    return problems


def _ids_at(root: Path, rev: str, folder: str) -> set[str]:
    """Ids of the records under `folder` at `rev` (a record's id is its file name)."""
    found = set()
    for name in gitrepo.files_at(root, rev, folder):
        path = Path(name)
        if path.suffix in (".yaml", ".yml") and documents.kind_of(path) is Record:
            found.add(path.stem)
    return found
