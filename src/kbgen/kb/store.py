"""Reading and writing the knowledge base's YAML files; the only module that imports a YAML library.

A fast path from libyaml's events for reading many files (and locating their problems), ruamel's
round trip for updates; saves never overwrite a file changed since it was read. See
docs/design.md, "YAML".
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml import resolver as ruamel_resolver
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scalarstring import LiteralScalarString

from kbgen.errors import Conflict, InvalidInput, KbgenError, Problem
from kbgen.kb.files import MIB, read_regular, write_atomic

MAX_BYTES = 8 * MIB  # a record, plan or spec is a few KB; anything this large is a mistake
MAX_VALUES = 200_000  # values in one document, aliases expanded
MAX_DEPTH = 100  # nesting of flow collections; the parsers recurse and crawl long before failing


@dataclass
class Document:
    """A YAML file as read: its round-trip tree and the digest of the bytes it came from."""

    path: Path
    data: Any
    digest: str | None  # sha256 of the file when read; None for a file not yet on disk


class _NotFast(Exception):
    """The text uses something the fast path leaves to ruamel: anchors, tags, merges, odd keys."""


def _implicit_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """ruamel's YAML 1.2 rules for plain scalars, by first character (compiled here: ruamel
    compiles lazily behind a proxy that is slow to call)."""
    table: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for versions, tag, regexp, first in ruamel_resolver.implicit_resolvers:
        kind = tag.rsplit(":", 1)[1]
        if (1, 2) in versions and kind in {"bool", "int", "float", "null", "timestamp", "merge"}:
            for char in first or [""]:
                table.setdefault(char, []).append((kind, re.compile(regexp.pattern, regexp.flags)))
    return table


_RESOLVERS = _implicit_resolvers()
_SCALARS = pyyaml.constructor.SafeConstructor()  # its float and timestamp rules, called directly


def _int(text: str) -> int:
    text = text.replace("_", "")
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    base = {"0b": 2, "0o": 8, "0x": 16}.get(digits[:2])
    return sign * (int(digits[2:], base) if base else int(digits))


def _plain_scalar(text: str) -> Any:
    for kind, regexp in _RESOLVERS.get(text[:1], ()):
        if regexp.match(text):
            if kind == "null":
                return None
            if kind == "bool":
                return text.lower() == "true"
            if kind == "int":
                return _int(text)
            if kind == "float":
                return _SCALARS.construct_yaml_float(pyyaml.ScalarNode(kind, text))
            if kind == "timestamp":
                return _SCALARS.construct_yaml_timestamp(pyyaml.ScalarNode(kind, text))
            raise _NotFast  # a merge key
    return text


_KEY = object()  # a mapping waiting for its next key


def _from_events(text: str) -> Any:
    """Plain data from libyaml's event stream, built without PyYAML's per-node constructor.

    Plain scalars resolve by the YAML 1.2 rules ruamel uses (so both loaders see the same
    values: `yes` is a string, `017` is 17); an integer key becomes its text, as `plain` makes
    it. Duplicate keys, other keys that are not strings, anchors, aliases, explicit tags, merge
    keys and multiple documents raise _NotFast: ruamel reads those.
    """
    return _walk(text, located=False)


class _Lines(dict[Any, tuple[int, Any]]):
    """Where each key of one mapping starts (1-based line) and what it holds (`positions`)."""

    def at(self, part: str | int) -> tuple[int, Any] | None:
        return None if isinstance(part, int) else self.get(part)


class _ItemLines(list[tuple[int, Any]]):
    """Where each item of one sequence starts (1-based line) and what it holds."""

    def at(self, part: str | int) -> tuple[int, Any] | None:
        return self[part] if isinstance(part, int) and 0 <= part < len(self) else None


def _walk(text: str, located: bool) -> Any:
    """The document built from libyaml's events by `_from_events`' rules: plain data, or with
    `located` the line of every key and item beside what it holds (`_Lines`, `_ItemLines`)."""
    mapping, sequence = (_Lines, _ItemLines) if located else (dict, list)
    root: list[Any] = sequence()
    stack: list[Any] = [root]
    keys: list[Any] = [None]

    def add(value: Any, line: int) -> None:
        top = stack[-1]
        if type(top) is sequence:
            top.append((line, value) if located else value)
        elif keys[-1] is _KEY:
            if type(value) is int:  # `per_unit`'s prompt indexes: text, as `plain` makes them
                value = str(value)
            elif type(value) is not str:
                raise _NotFast
            if value in top:
                raise _NotFast
            keys[-1] = (line, value)
        else:
            key_line, key = keys[-1]
            top[key] = (key_line, value) if located else value
            keys[-1] = _KEY

    event: Any  # the attributes differ by kind; the kind is checked first
    for event in pyyaml.parse(text, Loader=pyyaml.CSafeLoader):
        kind = type(event)
        if kind is pyyaml.ScalarEvent:
            if event.anchor is not None or event.tag not in (None, "!"):
                raise _NotFast
            plain_style = not event.style and event.implicit[0]
            value = _plain_scalar(event.value) if plain_style else event.value
            add(value, event.start_mark.line + 1)
        elif kind is pyyaml.MappingStartEvent or kind is pyyaml.SequenceStartEvent:
            if event.anchor is not None or event.tag is not None:
                raise _NotFast
            if type(stack[-1]) is mapping and keys[-1] is _KEY:
                raise _NotFast  # a collection as a key
            container: Any = mapping() if kind is pyyaml.MappingStartEvent else sequence()
            add(container, event.start_mark.line + 1)
            stack.append(container)
            keys.append(_KEY)
        elif kind is pyyaml.MappingEndEvent or kind is pyyaml.SequenceEndEvent:
            stack.pop()
            keys.pop()
        elif kind is pyyaml.AliasEvent:
            raise _NotFast
    if len(root) != 1:
        raise _NotFast  # empty, or several documents
    return root[0][1] if located else root[0]


def positions(path: Path) -> Any:
    """A tree of the file that `line_of` finds lines in: from libyaml's events where the fast
    path reads the file (a thousand broken files are located in seconds), else ruamel's."""
    text, _ = read_text(path)
    if not _suspicious(text):
        try:
            return _walk(text, located=True)
        except (pyyaml.YAMLError, ValueError, _NotFast):
            pass
    return _parse(_round_trip_yaml(), path, text)


def _round_trip_yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 100
    return yaml


def _problem(path: Path, message: str, line: int | None = None) -> InvalidInput:
    return InvalidInput([Problem(path, line, "", message)])


def read_text(path: Path, inside: Path | None = None) -> tuple[str, str]:
    """The file's text and sha256; a file that is not small UTF-8 text, or not a regular file
    inside `inside` (`files.read_regular`), is an InvalidInput."""
    raw = read_regular(path, MAX_BYTES, inside)
    return text_of(path, raw), hashlib.sha256(raw).hexdigest()


def text_of(path: Path, raw: bytes) -> str:
    """The text of `raw`, the bytes of the file at `path` (read, or about to be written there);
    bytes that are not small UTF-8 text are an InvalidInput."""
    if len(raw) > MAX_BYTES:
        raise _problem(path, f"too large ({len(raw):,} bytes; the limit is {MAX_BYTES:,})")
    nul = raw.find(b"\0")
    if nul >= 0:
        raise _problem(path, "not a text file (NUL byte)", raw.count(b"\n", 0, nul) + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise _problem(path, f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", line) from exc


def _suspicious(text: str) -> bool:
    """Text that may hold an alias bomb or deep nesting: only the guarded parser reads it."""
    return ("*" in text and "&" in text) or text.count("[") + text.count("{") > MAX_DEPTH


def _parse(yaml: YAML, path: Path, text: str) -> Any:
    if text.count("[") + text.count("{") > MAX_DEPTH and _flow_depth(text) > MAX_DEPTH:
        raise _problem(path, f"YAML nesting is deeper than {MAX_DEPTH} levels")
    try:
        data = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "malformed YAML"
        if isinstance(exc, DuplicateKeyError):  # it quotes both values: a secret's, it may be
            what = what.split(" with value ", 1)[0]
        if mark is not None and text[mark.index : mark.index + 1] == "\t":
            what = "a tab character; YAML is indented with spaces only"
        raise _problem(path, f"YAML syntax: {what}", line) from exc
    except ReaderError as exc:  # a control character: no mark, but a position
        line = text.count("\n", 0, exc.position) + 1
        raise _problem(
            path, f"not YAML text: control character U+{exc.character:04X}", line
        ) from exc
    except YAMLError as exc:
        raise _problem(path, f"YAML syntax: {_first_line(exc)}") from exc
    except RecursionError as exc:
        raise _problem(path, "YAML nesting is too deep") from exc
    except ValueError as exc:  # an integer past Python's 4300 digits: no mark, find its line
        long = re.search(r"\d{4300}", text)
        line = text.count("\n", 0, long.start()) + 1 if long else None
        raise _problem(path, f"YAML value cannot be read: {_first_line(exc)}", line) from exc
    if "*" in text and "&" in text and _expanded_size(data) > MAX_VALUES:
        raise _problem(path, f"expands to more than {MAX_VALUES:,} values (alias bomb?)", 1)
    if data is None:
        raise _problem(path, "empty document: expected a mapping of fields", 1)
    if not isinstance(data, dict):
        raise _problem(path, f"expected a mapping of fields at the top, found {_kind(data)}", 1)
    return data


def _flow_depth(text: str) -> int:
    """Deepest nesting of `[` and `{` (quotes ignored: an over-estimate is harmless here)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _expanded_size(data: Any) -> int:
    """Values in `data` with aliases expanded, counting stops past MAX_VALUES.

    YAML aliases let a few lines stand for billions of values ("billion laughs"); validating such
    a tree would never end. Only called when the text could hold an alias at all.
    """
    count, stack = 0, [data]
    while stack and count <= MAX_VALUES:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def load_fast(path: Path, inside: Path | None = None) -> dict[str, Any]:
    """Plain Python data of a YAML mapping file, parsed by the fast path (no positions)."""
    text, _ = read_text(path, inside)
    return plain_of_text(text, path)


def plain_of_text(text: str, path: Path = Path("<text>")) -> dict[str, Any]:
    """Plain Python data of YAML text holding a mapping (a file's at a git revision), parsed
    by the fast path where it can be (else by ruamel, whose errors name `path`)."""
    if not _suspicious(text):
        try:
            data = _from_events(text)
        except (pyyaml.YAMLError, ValueError, _NotFast):
            pass  # ruamel reads it below, and its message and line are the ones reported
        else:
            if isinstance(data, dict):
                return data
    return plain(_parse(_round_trip_yaml(), path, text))  # type: ignore[no-any-return]


def load_document(path: Path, inside: Path | None = None) -> Document:
    """The round-trip tree of a YAML mapping file: comments, key order and positions kept."""
    text, digest = read_text(path, inside)
    return Document(path, _parse(_round_trip_yaml(), path, text), digest)


def parse_text(text: str, path: Path = Path("<text>")) -> Any:
    """The round-trip tree of YAML text that is not (yet) a file."""
    return _parse(_round_trip_yaml(), path, text)


def new_document(path: Path, data: Mapping[str, Any]) -> Document:
    """A document not yet on disk; `save` refuses to overwrite a file that appears meanwhile."""
    return Document(path, _to_tree(data), None)


def line_of(tree: Any, loc: Iterable[str | int]) -> tuple[int, list[str | int]]:
    """1-based line of the deepest part of `loc` present in a round-trip tree, and that part.

    Parts that are not in the data (a missing key, a union tag from the validator) are not
    followed; the line is then the one of the nearest enclosing key. The returned path keeps the
    found parts plus a final missing mapping key, which is what the user needs to read.
    """
    node, line = tree, 1
    found: list[str | int] = []
    parts = list(loc)
    for i, part in enumerate(parts):
        if isinstance(node, CommentedMap) and not isinstance(part, int) and part in node:
            line = node.lc.key(part)[0] + 1
            node = node[part]
            found.append(part)
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            line = node.lc.item(part)[0] + 1
            node = node[part]
            found.append(part)
        elif isinstance(node, _Lines | _ItemLines) and (entry := node.at(part)) is not None:
            line, node = entry
            found.append(part)
        elif (
            i == len(parts) - 1
            and isinstance(node, CommentedMap | _Lines)
            and isinstance(part, str)
            and part != "[key]"  # pydantic's marker for an invalid key: the key is found already
        ):
            found.append(part)  # a required key that is missing: name it
    return line, found


def dump(data: Any) -> str:
    """YAML text of a tree or plain data; multi-line strings become literal blocks.

    ruamel folds a long string at a space and leaves that space at the end of the line: the
    spaces at line ends are taken off, unless that would change what the text reads as (a
    literal block's own trailing spaces are its content)."""
    stream = io.StringIO()
    yaml = _round_trip_yaml()
    yaml.dump(_to_tree(data), stream)
    text = stream.getvalue()
    if " \n" not in text:
        return text
    try:
        blocks = {  # the lines of block scalars, whose spaces are their content
            line
            for event in pyyaml.parse(text, Loader=pyyaml.CSafeLoader)
            if isinstance(event, pyyaml.ScalarEvent)
            and event.style in ("|", ">")
            and event.start_mark is not None
            and event.end_mark is not None
            for line in range(event.start_mark.line, event.end_mark.line + 1)
        }
    except pyyaml.YAMLError:  # what libyaml cannot read (a lone surrogate, escaped): as it is
        return text
    lines = text.split("\n")
    tidy = "\n".join(line if i in blocks else line.rstrip(" ") for i, line in enumerate(lines))
    return tidy if _same_data(tidy, text, yaml) else text


def _same_data(one: str, other: str, yaml: YAML) -> bool:
    """Whether two YAML texts read as the same data: by the C-based safe loader (five times
    faster than the round trip on a sweep's record), or by `yaml`'s own where it cannot."""
    try:
        safe = YAML(typ="safe")
        return bool(safe.load(one) == safe.load(other))
    except YAMLError:  # a tag the safe loader does not know
        return bool(plain(yaml.load(one)) == plain(yaml.load(other)))


def _to_tree(value: Any) -> Any:
    if isinstance(value, CommentedMap | CommentedSeq):
        return value
    if isinstance(value, Mapping):
        return CommentedMap((k, _to_tree(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return CommentedSeq(_to_tree(v) for v in value)
    if isinstance(value, str) and "\n" in value and _printable_lines(value):
        return LiteralScalarString(value)
    return value


# what a literal block cannot hold as it is (YAML's printable set, less its line breaks and
# the byte-order mark): a string with any of them is quoted, and these escaped
_NOT_IN_BLOCK = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)


def _printable_lines(text: str) -> bool:
    """Whether a literal block can hold `text` and read it back as it is."""
    return _NOT_IN_BLOCK.search(text) is None


def merge(tree: CommentedMap, updates: Mapping[str, Any]) -> None:
    """Write `updates` into a round-trip tree in place, keeping comments and key order.

    Nested mappings are merged key by key, so a comment on a key that survives stays where the
    author put it; any other value replaces the old one. Keys absent from `updates` are kept.
    """
    for key, value in updates.items():
        old = tree.get(key)
        if isinstance(old, CommentedMap) and isinstance(value, Mapping):
            merge(old, value)
        else:
            tree[key] = _to_tree(value)


def plain(tree: Any) -> Any:
    """Plain dicts, lists and scalars of a round-trip tree (for validation and comparison)."""
    if isinstance(tree, Mapping):
        return {str(k): plain(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [plain(v) for v in tree]
    if isinstance(tree, str):
        return str(tree)
    if isinstance(tree, TaggedScalar):  # `!!str 1`: the text, as a string
        return str(tree.value)
    return tree


def _digest_on_disk(path: Path) -> str | None:
    if not os.path.lexists(path):
        return None
    try:
        return hashlib.sha256(read_regular(path, MAX_BYTES)).hexdigest()
    except KbgenError:
        return "unreadable"  # matches no digest: a file that became a FIFO is not overwritten


def unchanged(doc: Document) -> None:
    """Raise Conflict when the file is no longer what `doc` was read from (or, for a new
    document, when it exists now)."""
    if _digest_on_disk(doc.path) != doc.digest:
        what = "was created" if doc.digest is None else "changed on disk"
        raise Conflict(f"{doc.path}: {what} since it was read; not overwriting (re-run to retry)")


def save(doc: Document) -> None:
    """Write a document atomically; refuse if the file changed since it was read.

    Raises Conflict when someone else wrote the file after `doc` was loaded (or created it, for a
    new document). On success `doc.digest` is the digest of the new content. A writer that
    writes other files with it checks `unchanged` first, under `files.locked`.
    """
    text = dump(doc.data)
    unchanged(doc)
    write_atomic(doc.path, text.encode("utf-8"), replace=doc.digest is not None)
    doc.digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
