"""Writing a composed record and its samples file: a new record, or a planned one filled in.

Both files are replaced together or not at all, under a lock, after checking that the record is
still what it was; a planned record keeps its author's comments and fields (docs/design.md,
"Writing a record").
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kbgen import redact
from kbgen.errors import InvalidInput, Problem, UsageError
from kbgen.kb import documents, files, loading, store
from kbgen.kb.models import RawSamples, Record
from kbgen.kb.problems import located, problems_of
from kbgen.record.evidence import Evidence, samples_bytes

AUTHORED = {"schema_version", "id", "title", "created", "hypothesis"}  # kept when filling in
JOINED = ("resolves", "tags")  # the author's, then the composed record's
# whole, or gone where the composed record has none: no stale rows, no stale verdict (it keeps
# the author's rationale), no samples of another run, no unknown the composed setup knows
REPLACED = (
    "measurements",
    "spec_decode",
    "effective",
    "startup_s",
    "drafts",
    "verdict",
    "raw_samples",
    "unknown",
)


def write(
    path: Path,
    record: Record,
    evidence: Evidence | None,
    planned: store.Document | None = None,
    root: Path | None = None,
) -> Path:
    """Write the samples file (with evidence) and the record at `path`: a new record, or
    `planned` (the record at `path` as read when `record` was composed) filled in. `root` is
    the knowledge base its references and id are checked in (by default the record's folder).

    Raises Conflict, having written nothing, when the record at `path` is no longer `planned`
    (or, for a new record, exists now); InvalidInput, having written nothing, when `kbgen
    validate` would refuse the record as written or the samples file would replace one that is
    not the record's own.
    """
    if documents.kind_of(path) is not Record:
        message = f"in a {documents.PLANS_FOLDER}/ folder, where every file is a plan: no record"
        raise InvalidInput([Problem(path, None, "", f"{message} is written there")])
    record = _without_secrets(record)
    content = samples_bytes(evidence) if evidence is not None else None
    if content is not None and record.raw_samples is not None:
        sha256 = hashlib.sha256(content).hexdigest()
        record = record.model_copy(
            update={"raw_samples": RawSamples(path=record.raw_samples.path, sha256=sha256)}
        )
    with files.locked(path.parent):
        own = _samples_of(planned) if planned is not None else None  # before it is filled in
        if planned is None:
            doc = store.new_document(path, record.model_dump(exclude_unset=True))
            store.unchanged(doc)
            meant = record
        else:
            store.unchanged(planned)
            doc, meant = _filled_in(planned, record)
        tree = _as_validate_reads_it(doc, meant, root or path.parent)
        if content is not None and record.raw_samples is not None:
            samples = path.parent / record.raw_samples.path
            if os.path.lexists(samples) and own != record.raw_samples.path:
                message = (
                    f"{samples.name} exists and is not this record's samples (another record's, "
                    "or left by an interrupted kbgen record): not overwritten, nothing written; "
                    "move it away to record here"
                )
                raise InvalidInput([located(path, ["raw_samples", "path"], message, tree)])
            files.write_atomic(samples, content)
        store.save(doc)
    return path


def _as_validate_reads_it(doc: store.Document, meant: Record, root: Path) -> Any:
    """The round-trip tree of the bytes `store.save` would write for `doc`, once they are known
    to read back as `meant` and `kbgen validate` (of `root` with them) would find nothing wrong
    with them; InvalidInput with every problem found otherwise."""
    content = store.dump(doc.data).encode("utf-8", "surrogatepass")  # a lone surrogate: refused
    try:
        written, tree = documents.load_bytes(doc.path, content)
        problems = loading.problems_if_written(doc.path, written, tree, root)
    except InvalidInput as exc:
        problems = exc.problems
    else:
        loc = _first_difference(meant.model_dump(mode="json"), written.model_dump(mode="json"))
        if loc is not None:
            message = "holds a character that YAML does not keep as it is (it reads back changed)"
            problems.append(located(doc.path, loc, message, tree))
    if problems:
        said = "(in the record as it would be written; nothing written)"
        raise InvalidInput([replace(p, message=f"{p.message} {said}") for p in problems])
    return tree


def _first_difference(meant: Any, written: Any) -> list[str | int] | None:
    """The key path to where `written` first differs from `meant` (JSON data); None if nowhere."""
    if isinstance(meant, dict) and isinstance(written, dict):
        keys: list[Any] = list(dict.fromkeys([*meant, *written]))
    elif isinstance(meant, list) and isinstance(written, list) and len(meant) == len(written):
        keys = list(range(len(meant)))
    else:
        return None if meant == written else []
    for key in keys:
        inner = meant.get(key) if isinstance(meant, dict) else meant[key]
        other = written.get(key) if isinstance(written, dict) else written[key]
        found = _first_difference(inner, other)
        if found is not None:
            return [key, *found]
    return None


def _samples_of(doc: store.Document) -> str | None:
    return (store.plain(doc.data).get("raw_samples") or {}).get("path")


def _without_secrets(record: Record) -> Record:
    """The record with every secret in it masked: server arguments, the model's name, notes."""
    tree = record.model_dump(exclude_unset=True)
    masked = redact.data(tree)
    return record if masked is tree else Record.model_validate(masked)


def _filled_in(doc: store.Document, record: Record) -> tuple[store.Document, Record]:
    path = doc.path
    existing = store.plain(doc.data)
    if existing.get("status") not in ("planned", "running"):
        raise UsageError(
            f"{path}: is {existing.get('status')!r}; only a planned or running "
            "record is filled in (start a new one with kbgen new)"
        )
    rationale = (existing.get("verdict") or {}).get("rationale")
    if rationale and record.verdict is not None:
        verdict = record.verdict.model_copy(update={"rationale": rationale})
        record = record.model_copy(update={"verdict": verdict})
    updates = record.model_dump(exclude_unset=True, exclude=AUTHORED | set(JOINED))
    for key in JOINED:
        updates[key] = list(dict.fromkeys([*existing.get(key, []), *getattr(record, key)]))
    for key in REPLACED:
        if key in doc.data and key in updates:
            doc.data[key] = {}  # the key stays where the author put it
        elif key in doc.data:
            del doc.data[key]
    store.merge(doc.data, updates)
    try:
        return doc, Record.model_validate(store.plain(doc.data))
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc, store.load_document(path).data)) from exc
