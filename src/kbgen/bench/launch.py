"""Bringing a server up for a variant, and down again: the external, process and command launchers.

Command lines and server output are redacted on their way into the log and run.json, and a
`${NAME}` is replaced by its value only when a server is started or reached. How each launcher
behaves: docs/design.md, "Launchers".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kbgen import redact
from kbgen.bench import logline, rootcause
from kbgen.bench.client import Client
from kbgen.errors import InvalidInput, Problem, ServerFailed, UsageError
from kbgen.kb import files
from kbgen.kb.models import Variant
from kbgen.kb.problems import located
from kbgen.run.spec import (
    CommandServer,
    ExperimentSpec,
    ExternalServer,
    ProcessServer,
    Server,
    server_args,
)

POLL_S = 0.5
LINE_LIMIT = 2**20  # a longer line of server output is kept in pieces of this size
CAUSE_BYTES = 16 * LINE_LIMIT  # how much of a log's end is searched for why a server failed
COPY_GRACE_S = 5.0  # how long the output of an ended server may take to reach its log
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class Launched:
    """A server that answers, and how it was started (secrets redacted)."""

    url: str
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    reused: bool = False
    pid: int | None = None  # of a server process kbgen started
    startup_s: float | None = None  # from launching it until healthy; None: not launched here


Waiting = Callable[[float], None]  # called while waiting, with the seconds waited so far


class Launcher(Protocol):
    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched: ...

    async def stop(self) -> None: ...

    def alive(self) -> bool: ...


def why(log: Path, end: int | None = None) -> str:
    """What the last launch in `log` (up to byte `end`) says went wrong, in one line for an
    error message: its first error (`rootcause.cause`) or else its last line, and where the
    whole log is. Secrets masked, should any be there."""
    try:
        with log.open("rb") as file:
            size = file.seek(0, os.SEEK_END) if end is None else end
            file.seek(max(0, size - CAUSE_BYTES))
            text = file.read(size - file.tell()).decode(errors="replace")
    except OSError:
        return f"no log at {log}"
    launch = (logline.launches(logline.lines(text)) or [[]])[-1]
    found = rootcause.cause(launch)
    if found is not None:
        return f"{redact.text(found)} (the first error in {log})"
    said = rootcause.last(launch)
    if said is not None:
        return f"its last line: {redact.text(said)} (in {log})"
    return f"it wrote nothing to {log}"


def resolve(value: str, environ: Mapping[str, str] | None = None) -> str:
    """`value` with every `${NAME}` replaced by that environment variable's value."""
    environ = os.environ if environ is None else environ

    def lookup(found: re.Match[str]) -> str:
        if found.group(1) not in environ:
            raise UsageError(f"{found.group()} is not set in the environment")
        return environ[found.group(1)]

    return _REFERENCE.sub(lookup, value)


def check_environment(spec: ExperimentSpec, path: Path, on_nodes: bool = False) -> None:
    """Refuse, before anything runs, a spec whose server cannot be started as it is written:
    a `${NAME}` it references that is unset, or a secret masked in a run folder's copy; for a
    server started `on_nodes` of a cluster (whose `${NAME}`s are the nodes' to set), a secret
    written in the spec at all: only references travel. InvalidInput, each problem at its line
    of `path`."""
    server = spec.server
    values: dict[tuple[str | int, ...], str] = {("server", "url"): server.url}
    if isinstance(server, ProcessServer):
        values |= {("server", "command", i): item for i, item in enumerate(server.command)}
        values[("server", "model")] = server.model
        values |= {("server", "args", i): item for i, item in enumerate(server.args)}
        values |= {("server", "env", name): value for name, value in server.env.items()}
    for name, variant in spec.variants.items():
        values |= {("variants", name, "args", i): item for i, item in enumerate(variant.args)}
    problems = [] if on_nodes else _missing_drafts(spec, path)
    for loc, item in values.items():
        if on_nodes:
            if redact.text(item) == item:
                continue
            message = (
                "a secret written in the spec does not travel to a cluster's nodes: set it in "
                "their environment (where `ray start` runs) and write ${NAME} in its place"
            )
        elif redact.MASK in item:
            message = (
                "masked in this copy of the spec, so a resume cannot restore it: put the secret "
                "in an environment variable and write ${NAME} in its place, then resume"
            )
        else:
            try:
                resolve(item)
                continue
            except UsageError as exc:
                message = str(exc)
        problems.append(located(path, list(loc), message))
    if problems:
        raise InvalidInput(problems)


def _missing_drafts(spec: ExperimentSpec, path: Path) -> list[Problem]:
    """A variant's draft model given as a path (`/…`, `./…`, `../…`: from the folder kbgen
    runs in, as the server it starts sees it) that is not here, or one written with `~`, for
    a server kbgen starts here: found before any server loads for minutes only to fail. A hub
    name (`org/name`) is the server's to fetch; a cluster's nodes have their own."""
    if not isinstance(spec.server, ProcessServer):
        return []
    problems = []
    for name, variant in spec.variants.items():
        model = getattr(variant.speculative_config, "model", None)
        if model is None or not model.startswith(("/", "./", "../", "~")):
            continue
        loc: list[str | int] = ["variants", name, "speculative_config", "model"]
        if model.startswith("~"):  # the server is given it as written: no shell expands it
            message = f"write {model} without ~: the server is given the path as it is written"
        elif not Path(model).exists():
            message = f"no draft model at {model}: build or copy it there first"
        else:
            continue
        problems.append(located(path, loc, message))
    return problems


def _filled(command: str, variant: str, args: str) -> str:
    """A command launcher's shell command with `{variant}` and `{args}` filled in; every other
    brace (`${HOME}`, `awk '{print}'`) is the shell's and stays as written."""
    return command.replace("{variant}", variant).replace("{args}", args)


async def _keep(
    output: asyncio.StreamReader, log: Path, known: frozenset[str] = frozenset()
) -> None:
    """Copy a server's output into its log line by line, secrets masked (`known`: the ones it
    was given, masked however it echoes them), until it ends."""
    masked = redact.Lines(known)
    with log.open("ab") as out:
        while True:
            try:
                line = await output.readline()
            except ValueError:  # a line over LINE_LIMIT: the piece that is there
                line = await output.read(LINE_LIMIT)
            if not line:
                return
            with contextlib.suppress(OSError):  # a full disk: drain anyway, never block the server
                out.write(masked(line.decode(errors="replace")).encode())
                out.flush()


async def _copied(copier: asyncio.Task[None] | None) -> None:
    """Wait (a little) for a copier to have written everything the server said."""
    if copier is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(copier), COPY_GRACE_S)


def _close_pipes(process: asyncio.subprocess.Process) -> None:
    """Close our end of an ended server's output pipe. A process outside its group may still
    hold the pipe, so its end never comes by itself, and asyncio warns of an unclosed transport
    when the process is collected. The transport is asyncio's own attribute of the process (no
    public way to close it); closing it after the process ended closes only the pipes."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()


def _start_line(log: Path, command: str) -> None:
    """`$ COMMAND` (redacted) as a line of its own: a server killed mid-line left no newline."""
    log.parent.mkdir(parents=True, exist_ok=True)
    fresh = "" if files.ends_a_line(log) else "\n"
    with log.open("ab") as out:
        out.write(f"{fresh}$ {command}\n".encode())


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
                raise ServerFailed(f"{redact.text(url)} not healthy after {timeout_s:g} s")
            waiting(elapsed)
            await asyncio.sleep(POLL_S)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


class ExternalLauncher:
    """A server someone else runs; kbgen only waits for it."""

    def __init__(self, server: ExternalServer) -> None:
        self.server = server

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        url = resolve(self.server.url)
        await wait_healthy(url, self.server.startup_timeout_s, waiting)
        return Launched(url, reused=True)

    async def stop(self) -> None:
        return None

    def alive(self) -> bool:
        return True


class ProcessLauncher:
    """kbgen's own server process, one per distinct set of arguments."""

    def __init__(self, server: ProcessServer, folder: Path | None = None) -> None:
        self.server = server
        self.folder = folder
        self.process: asyncio.subprocess.Process | None = None
        self.argv: list[str] = []
        self.log: Path | None = None
        self.copier: asyncio.Task[None] | None = None  # the server's output into its log

    def command(self, variant: Variant) -> list[str]:
        """The server's command line as the spec writes it (`${NAME}` not yet resolved)."""
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
        if port_taken(self.server.host, self.server.port):
            raise ServerFailed(
                f"{self.server.host}:{self.server.port} is already in use by another process; "
                "kbgen will not measure a server it did not start (pick another port)"
            )
        environment = {name: resolve(value) for name, value in self.server.env.items()}
        resolved = [resolve(arg) for arg in argv]
        _start_line(log, shlex.join(launched.command))
        started = time.monotonic()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *resolved,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **environment},
                cwd=self.folder,
                # its own process group, so stop() reaches its workers, but kbgen's session:
                # a session of its own is a scheduler autogroup of its own on Linux, and on
                # a busy machine its API process then starved until a stream ended
                process_group=0,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise ServerFailed(
                f"cannot start {redact.text(argv[0])!r}: {exc.strerror or exc}"
            ) from exc
        assert self.process.stdout is not None
        known = redact.known(resolved, environment)
        self.copier = asyncio.create_task(_keep(self.process.stdout, log, known))
        self.argv, self.log = argv, log

        def died() -> str | None:
            if self.process is not None and self.process.returncode is not None:
                return (
                    f"the server for variant {name!r} exited with code "
                    f"{self.process.returncode} while starting"
                )
            return None

        try:
            await wait_healthy(self.server.url, self.server.startup_timeout_s, waiting, died)
        except ServerFailed as exc:
            # what a server still running said before it is stopped: not its shutdown's noise
            end = None if died() is not None else _size(log)
            await self.stop()  # the last words of one that exited are in the log once stopped
            raise ServerFailed(f"{exc}: {why(log, end)}") from exc
        launched.startup_s = time.monotonic() - started
        launched.pid = self.process.pid if self.process else None
        return launched

    async def stop(self) -> None:
        process, self.process, self.argv = self.process, None, []
        copier, self.copier = self.copier, None
        if process is not None and process.returncode is None:
            for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)  # the group we created: our server, its workers
                try:
                    await asyncio.wait_for(process.wait(), grace)
                    break
                except TimeoutError:
                    continue
        if process is not None:
            # workers outlive a leader that died (killed, or failed at start: vLLM's engine core
            # holds its memory on): the group is ours, make sure it is gone
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        await _copied(copier)
        if copier is not None:
            copier.cancel()  # a process outside the group may hold the pipe: stop listening
        if process is not None:
            _close_pipes(process)


class CommandLauncher:
    """The user's own start/stop commands, e.g. a systemd unit per variant."""

    def __init__(self, server: CommandServer) -> None:
        self.server = server
        self.running: str | None = None
        self.started = ""  # the start command that ran
        self.log: Path | None = None
        self.copiers: list[asyncio.Task[None]] = []  # output of what the commands left running

    async def _shell(self, command: str, log: Path) -> None:
        shown = shlex.join(_words(command))
        _start_line(log, shown)
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            limit=LINE_LIMIT,
        )
        assert process.stdout is not None
        copier = asyncio.create_task(_keep(process.stdout, log))
        self.copiers.append(copier)  # a server started in the background keeps writing
        code = await process.wait()
        await _copied(copier)
        if code != 0:
            raise ServerFailed(f"`{shown}` exited with code {code}: {why(log)}")

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        command = _filled(self.server.start, name, shlex.join(server_args(variant)))
        url = resolve(self.server.url)
        launched = Launched(url, _words(command))
        if self.running is not None and command == self.started:
            launched.reused = True  # the same start command: the server already runs it
            return launched
        await self.stop()
        started = time.monotonic()
        await self._shell(command, log)
        self.running, self.started, self.log = name, command, log
        await wait_healthy(url, self.server.startup_timeout_s, waiting)
        launched.startup_s = time.monotonic() - started
        return launched

    async def stop(self) -> None:
        if self.running is not None and self.server.stop and self.log is not None:
            name, self.running = self.running, None
            await self._shell(_filled(self.server.stop, name, ""), self.log)
            for copier in self.copiers:  # what the stop command stopped has nothing to add
                copier.cancel()
            self.copiers = []

    def alive(self) -> bool:
        return True


def _words(command: str) -> list[str]:
    """A shell command as run.json and the log show it: its words, secrets masked — in the
    whole string first, where a name and its value may be words apart (`Authorization: Bearer X`
    unquoted), then word by word."""
    try:
        return redact.args(shlex.split(redact.text(command)))
    except ValueError:  # unbalanced quotes: the shell will say so; show it as it is
        return [redact.text(command)]


def launcher_for(server: Server, folder: Path | None = None) -> Launcher:
    """The launcher a spec's server section asks for; a `process` server runs in `folder`,
    where its spec's relative paths are read from (the folder kbgen runs in without one)."""
    if isinstance(server, ProcessServer):
        return ProcessLauncher(server, folder)
    if isinstance(server, CommandServer):
        return CommandLauncher(server)
    return ExternalLauncher(server)
