"""`kbgen new`: a planned record to fill in, under an id that does not collide across branches.

Ids are the creation date plus a slug of the title, not a global sequence number: two people
opening records on two branches on the same day get different ids unless they chose the same
title, and then a short random suffix separates them.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import secrets
import unicodedata
from pathlib import Path

from pydantic import ValidationError

from kbgen.errors import UsageError
from kbgen.kb import files, store
from kbgen.kb.models import Record
from kbgen.kb.problems import problems_of

MAX_SLUG = 60

TEMPLATE = """\
# A planned experiment. Fill in the hypothesis, then run `kbgen bench` and `kbgen record`.
# Reference of every field: `kbgen schema` (JSON Schema) or the site's schema page.
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


def slugify(title: str) -> str:
    """Lower-case ASCII words joined by hyphens, at most MAX_SLUG characters."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:MAX_SLUG].rstrip("-") or "record"


def new_record_text(title: str, record_id: str, created: dt.date) -> str:
    """The YAML text of a planned record, validated before it is returned."""
    # A JSON string is a valid YAML double-quoted scalar: any title is safely quoted.
    text = TEMPLATE.format(id=record_id, title=json.dumps(title), created=created.isoformat())
    tree = store.parse_text(text)
    try:
        Record.model_validate(store.plain(tree))
    except ValidationError as exc:
        problems = problems_of(Path(f"{record_id}.yaml"), exc, tree)
        raise UsageError(
            f"cannot make a record of that title: {'; '.join(map(str, problems))}"
        ) from exc
    return text


def new_record(title: str, folder: Path, today: dt.date | None = None) -> Path:
    """Write a planned record for `title` into `folder` and return its path."""
    created = today or dt.date.today()
    # a random suffix, not a number: two branches adding the same title get different ids
    randomly = (f"-{secrets.token_hex(2)}" for _ in itertools.count())
    path = files.free_path(folder, f"{created.isoformat()}-{slugify(title)}", ".yaml", randomly)
    files.write_atomic(path, new_record_text(title, path.stem, created).encode(), replace=False)
    return path
