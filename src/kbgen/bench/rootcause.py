"""Why a server failed, in one line: the first error any of its processes wrote.

Pure: log lines in, text out. Why the first error and not the last: docs/design.md, "What the
server said".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kbgen.bench.logline import Line

MAX_CHARS = 400  # of the message named: an exception may quote a whole config
_TRACEBACK = "Traceback (most recent call last):"
_PROCESS_HEADER = re.compile(r"Process (?P<name>[\w.-]+):$")  # multiprocessing, before a traceback
_ERRORS = ("ERROR", "CRITICAL")


@dataclass
class _Event:
    process: str
    where: str
    text: str  # what names it: the ERROR line's message, then the exception line once read
    traceback: bool = False
    ended: bool = False  # its traceback's exception line has been read


def _shown(process: str, text: str) -> str:
    text = text.strip()
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 1] + "…"
    return f"{process}: {text}" if process else text


def cause(lines: Iterable[Line]) -> str | None:
    """The first error of these lines (one launch's): `PROCESS: MESSAGE`, or None if none."""
    events: list[_Event] = []
    reading: dict[str, _Event] = {}  # per process: the traceback whose exception line is due
    last_error: dict[str, _Event] = {}  # per process: its latest ERROR record
    previous: dict[str, str] = {}  # per process: its previous line's message
    for line in lines:
        key, message = line.pid, line.message
        if message.startswith(_TRACEBACK):
            header = last_error.get(key)
            if header is not None and header.where == line.where and not header.traceback:
                header.traceback = True  # logger.exception: the record's own traceback
                event = header
            else:
                named = _PROCESS_HEADER.match(previous.get(key, ""))
                process = line.process or (named.group("name") if named else "")
                event = _Event(process, line.where, "", traceback=True)
                events.append(event)
            reading[key] = event
        elif key in reading:
            if message.strip() and not message[:1].isspace():  # a frame is indented
                event = reading.pop(key)
                event.text, event.ended = message, True
        elif line.level in _ERRORS and message.strip():
            event = _Event(line.process, line.where, message)
            events.append(event)
            last_error[key] = event
        previous[key] = message
    first = next((e for e in events if e.text), None)
    return None if first is None else _shown(first.process, first.text)


def last(lines: Iterable[Line]) -> str | None:
    """The last line that says something, as `cause` shows one (None: nothing was written)."""
    found = None
    for line in lines:
        if line.message.strip() and not line.launch:
            found = line
    return None if found is None else _shown(found.process, found.message)
