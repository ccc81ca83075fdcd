"""`kbgen new`: a planned record or a plan to fill in, written where no file is yet.

A record's id is by default the creation date plus a slug of the title, a plan's the slug alone;
why, and what happens when the name is taken: docs/design.md, "Record and plan ids".
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import unicodedata
from pathlib import Path

from pydantic import BaseModel, ValidationError

from kbgen.errors import UsageError
from kbgen.kb import files, store
from kbgen.kb.models import ID_PATTERN, Plan, Record
from kbgen.kb.problems import problems_of

MAX_SLUG = 60

RECORD_TEMPLATE = """\
# yaml-language-server: $schema=../docs/schema/record.schema.json
# A planned experiment. Fill in the hypothesis, then run `kbgen bench` and `kbgen record`.
# Every field: docs/schema/record.schema.json (`kbgen schema` writes it; editors read it).
schema_version: 1
id: {id}
title: {title}
status: planned   # planned -> running -> concluded (or superseded)
created: {created}
context: |
  Why this experiment, and what decision it informs.
hypothesis:
  statement: What you expect to happen, in one sentence.
  primary_metric: decode_tok_s   # decode_tok_s, output_tok_s, ttft_ms, tpot_ms, itl_ms, e2e_ms
  direction: increase            # increase or decrease
  minimum_effect: 0.05           # smallest relative change that matters (0.05 = 5%)
resolves: []   # plan tasks, as PLAN-ID#TASK-ID
tags: []
"""

PLAN_TEMPLATE = """\
# yaml-language-server: $schema=../../docs/schema/plan.schema.json
# A plan. Each task is ticked when a concluded record resolves it (`resolves: [{id}#TASK-ID]`).
# Every field: docs/schema/plan.schema.json (`kbgen schema` writes it; editors read it).
schema_version: 1
id: {id}
title: {title}
context: |
  Why this plan exists, and what it should decide.
tasks:   # in order; a task's id is what a record's `resolves` names
  - id: first-step
    text: The first step, in one line.
"""


def slugify(title: str) -> str:
    """Lower-case ASCII words joined by hyphens, at most MAX_SLUG characters."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:MAX_SLUG].rstrip("-") or "record"


def new_record_text(title: str, record_id: str, created: dt.date) -> str:
    """The YAML text of a planned record, validated before it is returned."""
    # A JSON string is a valid YAML double-quoted scalar: any title is safely quoted.
    text = RECORD_TEMPLATE.format(
        id=record_id, title=json.dumps(title), created=created.isoformat()
    )
    return validated(text, Record, record_id)


def new_plan_text(title: str, plan_id: str) -> str:
    """The YAML text of a plan with one task to rename, validated before it is returned."""
    return validated(PLAN_TEMPLATE.format(id=plan_id, title=json.dumps(title)), Plan, plan_id)


def validated(text: str, model: type[BaseModel], doc_id: str) -> str:
    """`text`, a new file's YAML, once `model` accepts it; UsageError naming its problems."""
    tree = store.parse_text(text)
    try:
        model.model_validate(store.plain(tree))
    except ValidationError as exc:
        problems = problems_of(Path(f"{doc_id}.yaml"), exc, tree)
        kind = model.__name__.lower()
        raise UsageError(
            f"cannot make a {kind} of that title: {'; '.join(map(str, problems))}"
        ) from exc
    return text


def new_record(
    title: str, folder: Path, today: dt.date | None = None, record_id: str | None = None
) -> Path:
    """Write a planned record for `title` into `folder` and return its path: named `record_id`,
    by default by the date and the title's slug; either must be free (a record of that title
    today is refused, never renamed behind its author's back)."""
    created = today or dt.date.today()
    path = free(
        folder, f"{created.isoformat()}-{slugify(title)}" if record_id is None else record_id
    )
    files.write_atomic(path, new_record_text(title, path.stem, created).encode(), replace=False)
    return path


def new_plan(title: str, folder: Path, plan_id: str | None = None) -> Path:
    """Write a plan for `title` into `folder`'s plans/ and return its path: named `plan_id`, by
    default the title's slug; either must be free (records name a plan's tasks by its id, so it
    is chosen, never made up)."""
    chosen = plan_id if plan_id is not None else slugify(title)
    path = free(folder / files.PLANS_FOLDER, chosen)
    files.write_atomic(path, new_plan_text(title, path.stem).encode(), replace=False)
    return path


def free(folder: Path, doc_id: str) -> Path:
    """`folder/doc_id.yaml`, for an id that is one and a name that is free (a creator racing
    this one is still refused: the write is exclusive)."""
    if not re.fullmatch(ID_PATTERN, doc_id):
        raise UsageError(
            f"{doc_id!r} is no id: lower-case letters, digits and inner hyphens, at most 80 "
            "characters"
        )
    path = folder / f"{doc_id}.yaml"
    if os.path.lexists(path):
        raise UsageError(f"{path}: already exists; not overwritten (choose another id: --id)")
    plans = folder.name == files.PLANS_FOLDER
    for other in files.iter_yaml_files([folder]) if folder.is_dir() else []:
        if other.stem == doc_id and (other.parent.name == files.PLANS_FOLDER) == plans:
            raise UsageError(f"{other}: already has the id {doc_id!r} (choose another: --id)")
    return path
