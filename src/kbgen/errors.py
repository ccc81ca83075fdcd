"""The one error tree of kbgen, and how each kind of error is shown.

Every failure a user can cause or meet is a :class:`KbgenError`; the CLI prints its `lines`,
never a traceback, and maps each class to an exit code in one place (``cli.EXIT_CODES``).
Third-party exceptions are translated where they enter (store, client, ...), ``from exc``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

# Control characters (line breaks among them: `\x1e` and U+2028 end a line for str.splitlines)
# as escapes, so that a key or value from a hostile file cannot split a problem over two lines.
_ONE_LINE = {c: repr(chr(c))[1:-1] for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with one file, located as precisely as the input allows."""

    path: Path
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else f"{self.path}"
        said = (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )
        return said.translate(_ONE_LINE)


def _unmasked(text: str) -> str:
    return text


class KbgenError(Exception):
    """Root of every error kbgen raises on purpose."""

    def lines(self, mask: Callable[[str], str] = _unmasked) -> list[str]:
        """How the command line shows it: `error: MESSAGE`, a line each, through `mask` (the
        secrets policy)."""
        return [f"error: {line}" for line in mask(str(self)).splitlines() or [type(self).__name__]]


class UsageError(KbgenError):
    """The command line itself is wrong (missing path, bad option value)."""


class InvalidInput(KbgenError):
    """One or more input files are invalid; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (str(p.path), p.line or 0, p.field))
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self, mask: Callable[[str], str] = _unmasked) -> list[str]:
        """One line per problem, `FILE:LINE: FIELD: MESSAGE`, then their count. Each part is
        masked alone: a file or a field named like a secret (`plans/auth-proxy.yaml`, `auth:`)
        is no secret, and masked with what follows it the line would lose its line number or
        its message."""
        parts = [
            replace(p, path=Path(mask(str(p.path))), field=mask(p.field), message=mask(p.message))
            for p in self.problems
        ]
        count = len({p.path for p in self.problems})
        noun = "problem" if len(self.problems) == 1 else "problems"
        return [*map(str, parts), f"{len(self.problems)} {noun} in {count} file(s)"]


class InvalidHead(InvalidInput):
    """`kbgen diff`'s head side does not validate, so there is nothing to compare; `base` and
    `head` name the two sides, and `comment`, once `kbgen diff` has written it, is the
    pull-request comment that says what is invalid, printed before the error."""

    def __init__(self, problems: list[Problem], base: str, head: str) -> None:
        super().__init__(problems)
        self.base, self.head = base, head
        self.comment = ""


class TemplateError(KbgenError):
    """A template could not be rendered (syntax, an undefined name, something the sandbox
    refuses, a missing or refused file): one line, `FILE:LINE: message`."""


class Mismatch(KbgenError):
    """Variants were measured under different conditions and cannot be compared as they are."""


class Conflict(KbgenError):
    """A file changed on disk after kbgen read it; writing would lose someone's edit."""


class StoreError(KbgenError):
    """A file could not be read or written for a reason outside its content (permissions, disk)."""


class ServerError(KbgenError):
    """The LLM server could not be started, reached, or understood, or it died."""


class ServerFailed(ServerError):
    """The server could not be started, died, or never became healthy."""


class ServerUnreachable(ServerError):
    """The server did not answer a plain request (down, wrong URL, refused)."""


class MetricsError(ServerError):
    """The server's `/metrics` text could not be parsed."""


class ClientFailed(KbgenError):
    """A client process of `kbgen bench` died during a window (killed, out of memory, a bug);
    the run keeps every sample that finished."""
