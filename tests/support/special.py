"""Files that are not what a reader expects — a FIFO, a device, a folder, symlinks that dangle,
loop or lead out of their folder — made at a given path, and a deadline for code that might
hang on one."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _folder(path: Path) -> None:
    path.mkdir()


def _dangling(path: Path) -> None:
    path.symlink_to(path.with_name("nowhere"))


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _socket(path: Path) -> None:
    """Bound by its name from its own folder: a socket's path may be at most 107 bytes, and a
    test's folder under pytest-xdist is longer."""
    here = Path.cwd()
    os.chdir(path.parent)
    try:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(path.name)  # the socket file stays after the socket is closed
    finally:
        os.chdir(here)


def _outside(path: Path) -> None:
    """A symlink to a readable file outside the folder `path` is in (its content: `OUTSIDE`)."""
    outside = path.parent.parent / f"outside-{path.parent.name}-{path.name}"
    outside.write_bytes(OUTSIDE)
    path.symlink_to(outside)


OUTSIDE = b"secret: from outside the folder\n"

# kind -> (how to make it at a path, what the one located line says)
SPECIAL: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "a FIFO (named pipe), not a regular file"),
    "dev-zero": (_dev_zero, "a character device, not a regular file"),
    "folder": (_folder, "a folder, not a regular file"),
    "dangling-symlink": (_dangling, "a dangling symlink"),
    "symlink-loop": (_loop, "a symlink loop"),
    "socket": (_socket, "a socket, not a regular file"),
    "symlink-outside": (_outside, "a symlink to a file outside"),
}


def make(kind: str, path: Path) -> str:
    """Make a special file of `kind` at `path`; what the error about it says."""
    maker, message = SPECIAL[kind]
    path.parent.mkdir(parents=True, exist_ok=True)
    maker(path)
    return message


class Hung(BaseException):  # not an Exception: no `except Exception` in kbgen may swallow it
    """The code under test blocked past its deadline."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail with `Hung` if the block runs longer than `seconds` (SIGALRM interrupts a blocked
    system call, such as opening a FIFO that has no writer)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def gone_pid() -> str:
    """The id of a process that has ended (a child run to completion): a writer that is gone."""
    return subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()
