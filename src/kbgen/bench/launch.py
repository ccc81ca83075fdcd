"""Bringing a server up for a variant, and down again: the external, process and command launchers.

`process` starts the exact command the spec gives (vLLM's own `vllm serve`, or a wrapper) with the
variant's arguments appended, keeps its output in the run folder, waits for `/health` as long as
the spec allows (a large model loads for an hour), fails fast with the log's tail when the process
exits, and stops its whole process group — the engine's workers included — with SIGTERM, then
SIGKILL. A variant whose arguments equal the running server's reuses it (`command`: one whose
start command equals the one that ran).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kbgen import redact
from kbgen.bench.client import Client
from kbgen.bench.spec import CommandServer, ExternalServer, ProcessServer, Server, server_args
from kbgen.errors import ServerFailed
from kbgen.kb import files
from kbgen.kb.models import Variant

TAIL_LINES = 30
POLL_S = 0.5


@dataclass
class Launched:
    """A server that answers, and how it was started (secrets redacted)."""

    url: str
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    reused: bool = False
    pid: int | None = None  # of a server process kbgen started


Waiting = Callable[[float], None]  # called while waiting, with the seconds waited so far


class Launcher(Protocol):
    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched: ...

    async def stop(self) -> None: ...

    def alive(self) -> bool: ...


def tail(log: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a log, for an error message."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(log is empty)"


async def wait_healthy(
    url: str,
    timeout_s: float,
    waiting: Waiting,
    died: Callable[[], str | None] = lambda: None,
) -> None:
    """Return once `url/health` answers 200; raise ServerFailed on timeout or when `died` says."""
    start = time.monotonic()
    async with Client(url) as client:
        while True:
            reason = died()
            if reason is not None:
                raise ServerFailed(reason)
            if await client.healthy():
                return
            elapsed = time.monotonic() - start
            if elapsed > timeout_s:
                raise ServerFailed(f"{url} not healthy after {timeout_s:g} s")
            waiting(elapsed)
            await asyncio.sleep(POLL_S)


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


class ExternalLauncher:
    """A server someone else runs; kbgen only waits for it."""

    def __init__(self, server: ExternalServer) -> None:
        self.server = server

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        await wait_healthy(self.server.url, self.server.startup_timeout_s, waiting)
        return Launched(self.server.url, reused=True)

    async def stop(self) -> None:
        return None

    def alive(self) -> bool:
        return True


class ProcessLauncher:
    """kbgen's own server process, one per distinct set of arguments."""

    def __init__(self, server: ProcessServer) -> None:
        self.server = server
        self.process: asyncio.subprocess.Process | None = None
        self.argv: list[str] = []
        self.log: Path | None = None

    def command(self, variant: Variant) -> list[str]:
        s = self.server
        return [
            *s.command,
            s.model,
            *s.args,
            *server_args(variant),
            "--host",
            s.host,
            "--port",
            str(s.port),
        ]

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        argv = self.command(variant)
        launched = Launched(self.server.url, redact.args(argv), redact.env(self.server.env))
        if self.alive() and argv == self.argv:
            launched.reused = True
            launched.pid = self.process.pid if self.process else None
            return launched
        await self.stop()
        if _port_taken(self.server.host, self.server.port):
            raise ServerFailed(
                f"{self.server.host}:{self.server.port} is already in use by another process; "
                "kbgen will not measure a server it did not start (pick another port)"
            )
        log.parent.mkdir(parents=True, exist_ok=True)
        # a server killed mid-line leaves no newline: the command starts a line of its own
        fresh = "" if files.ends_a_line(log) else "\n"
        with log.open("ab") as out:
            out.write(f"{fresh}$ {shlex.join(launched.command)}\n".encode())
            out.flush()
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    env={**os.environ, **self.server.env},
                    start_new_session=True,  # its own process group: stop() reaches its workers
                )
            except OSError as exc:
                raise ServerFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
        self.argv, self.log = argv, log

        def died() -> str | None:
            if self.process is not None and self.process.returncode is not None:
                return (
                    f"the server for variant {name!r} exited with code "
                    f"{self.process.returncode} while starting; last lines of {log}:\n{tail(log)}"
                )
            return None

        try:
            await wait_healthy(self.server.url, self.server.startup_timeout_s, waiting, died)
        except ServerFailed as exc:
            await self.stop()
            if "not healthy after" in str(exc):
                raise ServerFailed(f"{exc}; last lines of {log}:\n{tail(log)}") from exc
            raise
        launched.pid = self.process.pid if self.process else None
        return launched

    async def stop(self) -> None:
        process, self.process, self.argv = self.process, None, []
        if process is None or process.returncode is not None:
            return
        for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)  # the group we created: our server and its workers
            try:
                await asyncio.wait_for(process.wait(), grace)
                break
            except TimeoutError:
                continue
        # workers may outlive the leader by a moment; the group is ours, make sure it is gone
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


class CommandLauncher:
    """The user's own start/stop commands, e.g. a systemd unit per variant."""

    def __init__(self, server: CommandServer) -> None:
        self.server = server
        self.running: str | None = None
        self.started = ""  # the start command that ran
        self.log: Path | None = None

    async def _shell(self, command: str, log: Path) -> None:
        fresh = "" if files.ends_a_line(log) else "\n"
        with log.open("ab") as out:
            out.write(f"{fresh}$ {shlex.join(redact.args(shlex.split(command)))}\n".encode())
            out.flush()
            process = await asyncio.create_subprocess_shell(
                command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
            code = await process.wait()
        if code != 0:
            raise ServerFailed(
                f"`{command}` exited with code {code}; last lines of {log}:\n{tail(log)}"
            )

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        command = self.server.start.format(variant=name, args=shlex.join(server_args(variant)))
        launched = Launched(self.server.url, redact.args(shlex.split(command)))
        if self.running is not None and command == self.started:
            launched.reused = True  # the same start command: the server already runs it
            return launched
        await self.stop()
        log.parent.mkdir(parents=True, exist_ok=True)
        await self._shell(command, log)
        self.running, self.started, self.log = name, command, log
        await wait_healthy(self.server.url, self.server.startup_timeout_s, waiting)
        return launched

    async def stop(self) -> None:
        if self.running is not None and self.server.stop and self.log is not None:
            name, self.running = self.running, None
            await self._shell(self.server.stop.format(variant=name, args=""), self.log)

    def alive(self) -> bool:
        return True


def launcher_for(server: Server) -> Launcher:
    """The launcher a spec's server section asks for."""
    if isinstance(server, ProcessServer):
        return ProcessLauncher(server)
    if isinstance(server, CommandServer):
        return CommandLauncher(server)
    return ExternalLauncher(server)
