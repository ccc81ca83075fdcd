"""Writing a composed record and its samples file: a new record, or a planned one filled in.

Both files are replaced together or not at all, under a lock, after checking that the record is
still what it was; a planned record keeps its author's comments and fields (docs/design.md,
"Writing a record").
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from kbgen import redact
from kbgen.errors import InvalidInput, UsageError
from kbgen.kb import files, store
from kbgen.kb.models import RawSamples, Record
from kbgen.kb.problems import problems_of
from kbgen.record.evidence import Evidence, samples_bytes

AUTHORED = {"schema_version", "id", "title", "created", "hypothesis"}  # kept when filling in
JOINED = ("resolves", "tags")  # the author's, then the composed record's
REPLACED = ("measurements", "spec_decode", "effective", "startup_s")  # whole: no stale rows


def write(
    path: Path, record: Record, evidence: Evidence | None, planned: store.Document | None = None
) -> Path:
    """Write the samples file (with evidence) and the record at `path`: a new record, or
    `planned` (the record at `path` as read when `record` was composed) filled in.

    Raises Conflict, having written nothing, when the record at `path` is no longer `planned`
    (or, for a new record, exists now).
    """
    record = _without_secrets(record)
    content = samples_bytes(evidence) if evidence is not None else None
    if content is not None and record.raw_samples is not None:
        sha256 = hashlib.sha256(content).hexdigest()
        record = record.model_copy(
            update={"raw_samples": RawSamples(path=record.raw_samples.path, sha256=sha256)}
        )
    with files.locked(path.parent):
        if planned is None:
            doc = store.new_document(path, record.model_dump(exclude_unset=True))
            store.unchanged(doc)
        else:
            store.unchanged(planned)
            doc = _filled_in(planned, record)
        if content is not None and record.raw_samples is not None:
            files.write_atomic(path.parent / record.raw_samples.path, content)
        store.save(doc)
    return path


def _without_secrets(record: Record) -> Record:
    """The record with every secret in it masked: server arguments, the model's name, notes."""
    tree = record.model_dump(exclude_unset=True)
    masked = redact.data(tree)
    return record if masked is tree else Record.model_validate(masked)


def _filled_in(doc: store.Document, record: Record) -> store.Document:
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
        if key in doc.data:
            doc.data[key] = {}
    store.merge(doc.data, updates)
    try:
        Record.model_validate(store.plain(doc.data))
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc, store.load_document(path).data)) from exc
    return doc
