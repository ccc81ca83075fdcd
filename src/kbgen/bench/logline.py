"""The anatomy of a line of a server's log as kbgen keeps it: which process wrote it, at what level.

Parsing is pure and never fails: a line that fits no pattern is its own message. vLLM's line
formats: docs/design.md, "What the server said".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

LAUNCH = "$ "  # what kbgen's launchers write before the command of each launch

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # VLLM_LOGGING_COLOR=1 colours the prefixes
_PROCESS = re.compile(r"\((?P<name>[^()\s]+) pid=(?P<pid>\d+)\) ")
_RECORD = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<when>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[(?P<where>[^\]]*)\] ?"
)
_UVICORN = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")


@dataclass(frozen=True)
class Line:
    """One line of a server's output, taken apart."""

    number: int  # from 1, within the text it was read from
    process: str  # the process's name (`EngineCore`, `APIServer`, `Worker`); "" when unnamed
    pid: str  # "" when unnamed
    level: str  # DEBUG … CRITICAL for a log record; "" for other output
    where: str  # `file.py:line` of a vLLM log record; ""
    message: str  # the rest: the record's message, or the whole line

    @property
    def source(self) -> str:
        """Who wrote it, for grouping: the process id (names vary: `VllmWorker-0`, `Worker`)."""
        return self.pid

    @property
    def launch(self) -> bool:
        """Whether it is the `$ COMMAND` line a kbgen launcher writes before each launch."""
        return not self.process and not self.level and self.message.startswith(LAUNCH)


def parse(number: int, raw: str) -> Line:
    """One line (without its newline) taken apart."""
    text = _ANSI.sub("", raw.rstrip("\r\n"))
    name = pid = level = where = ""
    found = _PROCESS.match(text)
    if found:
        name, pid = found.group("name"), found.group("pid")
        text = text[found.end() :]
    record = _RECORD.match(text)
    if record:
        level, where = record.group("level"), record.group("where")
        text = text[record.end() :]
    else:
        uvicorn = _UVICORN.match(text)
        if uvicorn:
            level = uvicorn.group("level")
            text = text[uvicorn.end() :]
    return Line(number, name, pid, level, where, text)


def lines(text: str) -> Iterator[Line]:
    """Every line of `text`, taken apart: split at newlines only, as the file counts them (a
    progress bar's carriage returns stay inside its line)."""
    pieces = text.split("\n")
    if pieces and not pieces[-1]:
        pieces.pop()
    for number, raw in enumerate(pieces, start=1):
        yield parse(number, raw)


def launches(parsed: Iterable[Line]) -> list[list[Line]]:
    """The lines grouped by launch, each group from its `$ COMMAND` line on (a log written
    before that, or by hand, is one launch)."""
    groups: list[list[Line]] = [[]]
    for line in parsed:
        if line.launch and groups[-1]:
            groups.append([])
        groups[-1].append(line)
    return [group for group in groups if group]
