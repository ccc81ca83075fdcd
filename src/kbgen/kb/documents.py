"""One YAML document read and validated: a record, a plan, or any model (a spec)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbgen.errors import InvalidInput, Problem
from kbgen.kb import files, store
from kbgen.kb.models import Plan, Record
from kbgen.kb.problems import problems_of

PLANS_FOLDER = files.PLANS_FOLDER
M = TypeVar("M", bound=BaseModel)


def kind_of(path: Path) -> type[Record] | type[Plan]:
    """Plans live in a `plans/` folder; every other YAML file is a record."""
    return Plan if path.parent.name == PLANS_FOLDER else Record


def load_model(path: Path, model: type[M]) -> M:
    """A YAML file validated as `model`; InvalidInput listing all its problems otherwise."""
    data = store.load_fast(path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc, store.positions(path))) from exc


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
    return _checked(path, store.load_fast(path), lambda: store.positions(path))


def load_bytes(path: Path, content: bytes) -> tuple[Record | Plan, Any]:
    """What `load_file` makes of `content` were it the file at `path` (bytes about to be written
    there), and their round-trip tree; every problem is located in `content`."""
    tree = store.parse_text(store.text_of(path, content), path)
    return _checked(path, store.plain(tree), lambda: tree), tree


def _checked(path: Path, data: Any, positions: Callable[[], Any]) -> Record | Plan:
    """`data`, the file at `path`, validated as the kind of file it is there, its id its name;
    `positions` gives the tree to locate problems in (parsed only when there are some)."""
    try:
        doc = kind_of(path).model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(problems_of(path, exc, positions())) from exc
    if doc.id != path.stem:
        line, _ = store.line_of(positions(), ["id"])
        raise InvalidInput(
            [Problem(path, line, "id", f"{doc.id!r} must equal the file name ({path.stem!r})")]
        )
    return doc
