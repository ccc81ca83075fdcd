"""How a window's requests are sent at a concurrency: from this event loop or from client processes.

Either way every finished sample is handed, as it finishes, to one callback in this process,
which alone writes the run folder. Why processes: docs/design.md, "Senders".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import site
import sys
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from pydantic import ValidationError

import kbgen
from kbgen.bench.client import Api, Client, Timeouts
from kbgen.errors import ClientFailed
from kbgen.kb.models import UsageMode
from kbgen.run.samples import Sample

STREAMS_PER_PROCESS = 128  # "auto": one client process for every 128 streams (or part of them)
MAX_LINE = 64 * 2**20  # a sample of 1,048,576 chunk stamps is about 24 MB of JSON
STOP_WAIT_S = 10.0  # a worker told to exit that is still there after this is killed


@dataclass(frozen=True)
class Job:
    """One request to send: its body, and the sample it fills (where it belongs set)."""

    api: Api
    body: dict[str, Any]
    sample: Sample
    usage: UsageMode = "continuous"  # how the server is asked for token counts
    due_ns: int | None = None  # open loop: when it is due (`time.perf_counter_ns`, one clock)


async def when_due(due_ns: int | None, sample: Sample) -> int:
    """Wait until `due_ns` (None: now); the time it was due, the request's scheduled time. On
    a schedule, `sample` keeps when its slot took it (`ready_ns`: any wait for a slot before)."""
    now = time.perf_counter_ns()
    if due_ns is None:
        return now
    sample.ready_ns = now
    if due_ns > now:
        await asyncio.sleep((due_ns - now) / 1e9)
    return due_ns


T = TypeVar("T")
OnDone = Callable[[Sample], Awaitable[bool]]
"""Called with every finished sample, in this process, one at a time per sender slot; False:
send nothing more (the requests in flight still finish and are handed over)."""


class Sender(Protocol):
    async def send(self, jobs: Sequence[Job], concurrency: int, on_done: OnDone) -> None:
        """Send `jobs` in order, `concurrency` at a time, each when due (if it has a time),
        handing each sample to `on_done`."""
        ...


def processes_for(setting: int | Literal["auto"], concurrency: int) -> int:
    """How many client processes a window uses: the setting, or for "auto" one per
    `STREAMS_PER_PROCESS` streams, at most one per CPU kbgen may run on; never more than the
    streams."""
    wanted = (
        min(math.ceil(concurrency / STREAMS_PER_PROCESS), _usable_cpus())
        if setting == "auto"
        else setting
    )
    return max(1, min(wanted, concurrency))


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class InProcess:
    """The requests sent from this event loop through `client`: `concurrency` coroutines, each
    taking the next request as it finishes one."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def send(self, jobs: Sequence[Job], concurrency: int, on_done: OnDone) -> None:
        async def one(job: Job) -> bool:
            scheduled = await when_due(job.due_ns, job.sample)
            sample = await self.client.stream(job.api, job.body, job.sample, scheduled, job.usage)
            return await on_done(sample)

        await in_slots(jobs, concurrency, one)


async def in_slots(
    items: Sequence[T], concurrency: int, work: Callable[[T], Awaitable[bool]]
) -> None:
    """`work` on each of `items` in order, `concurrency` at a time, each slot taking the next
    as it finishes one; once a `work` says False no slot takes another."""
    queue = list(reversed(items))
    stopped = False

    async def slot() -> None:
        nonlocal stopped
        while queue and not stopped:
            if not await work(queue.pop()):
                stopped = True

    await asyncio.gather(*(slot() for _ in range(concurrency)))


class _Worker:
    """One client process, seen from the parent."""

    def __init__(self, number: int, process: asyncio.subprocess.Process) -> None:
        self.number = number
        self.process = process
        self.stderr: deque[bytes] = deque(maxlen=40)  # its last lines, for a death's message
        self.drain = asyncio.ensure_future(self._drain_stderr())
        self.outstanding = 0  # requests handed to it whose samples have not come back
        self.ended = False  # told that no more requests come in this batch

    @property
    def stdin(self) -> asyncio.StreamWriter:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.process.stdout is not None
        return self.process.stdout

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.stderr.append(line)

    def tell(self, message: dict[str, Any]) -> None:
        if self.process.returncode is None and not self.stdin.is_closing():
            self.stdin.write(json.dumps(message).encode() + b"\n")

    async def death(self, why: str) -> str:
        """Why it is gone: `why`, its exit status and the last lines it wrote to stderr."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), STOP_WAIT_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drain, 1.0)
        code = self.process.returncode
        status = "still running" if code is None else f"exit status {code}"
        if code is not None and code < 0:
            status = f"killed by signal {-code}"
        tail = b"".join(self.stderr).decode(errors="replace").strip().splitlines()[-3:]
        said = f"; it said: {' | '.join(tail)}" if tail else ""
        return f"client process {self.number} (pid {self.process.pid}) {why} ({status}){said}"


class Processes:
    """The requests sent from `count` client processes, each with its own event loop and
    connection pool; use as `async with Processes(url, timeouts, count) as sender:`.

    Starting them (Python and kbgen's imports, about a second) happens on entering, before any
    window is timed; leaving closes their stdin, and they exit."""

    def __init__(self, base_url: str, timeouts: Timeouts, count: int) -> None:
        self.base_url = base_url
        self.timeouts = timeouts
        self.count = count
        self.workers: list[_Worker] = []

    async def __aenter__(self) -> Processes:
        try:
            for number in range(self.count):
                self.workers.append(await self._start(number))
            for worker in self.workers:
                line = await worker.stdout.readline()
                if not line.startswith(b'{"ready"'):
                    raise ClientFailed(await worker.death("did not start"))
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _start(self, number: int) -> _Worker:
        # the child imports the kbgen this process runs, wherever it came from; an installed
        # one's folder is site-packages, which must not go ahead of the standard library
        source = str(Path(kbgen.__file__).resolve().parents[1])
        installed = {
            str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]
        }
        first = [] if source in installed else [source]
        path = os.pathsep.join([*first, *filter(None, [os.environ.get("PYTHONPATH")])])
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kbgen.bench.senders",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=MAX_LINE,
            env={**os.environ, "PYTHONPATH": path},
        )
        worker = _Worker(number, process)
        # the URL on stdin, not on the command line: it may carry a credential
        worker.tell({"url": self.base_url, "timeouts": asdict(self.timeouts)})
        return worker

    async def aclose(self) -> None:
        for worker in self.workers:
            if not worker.stdin.is_closing():
                worker.stdin.close()
        for worker in self.workers:
            try:
                await asyncio.wait_for(worker.process.wait(), STOP_WAIT_S)
            except TimeoutError:
                worker.process.kill()
                await worker.process.wait()
            worker.drain.cancel()
        self.workers = []

    async def send(self, jobs: Sequence[Job], concurrency: int, on_done: OnDone) -> None:
        counts = [
            concurrency // self.count + (i < concurrency % self.count) for i in range(self.count)
        ]
        busy = [(w, slots) for w, slots in zip(self.workers, counts, strict=True) if slots]
        queue = deque(jobs)
        stopped = False
        deaths: list[str] = []

        def top_up(worker: _Worker, slots: int) -> None:
            # each worker holds its free slots' next requests, and as many again in its queue
            while queue and not stopped and worker.outstanding < 2 * slots:
                job = queue.popleft()
                worker.tell(
                    {
                        "job": {
                            "api": job.api,
                            "body": job.body,
                            "usage": job.usage,
                            "due_ns": job.due_ns,
                            "sample": job.sample.model_dump(),
                        }
                    }
                )
                worker.outstanding += 1
            if (not queue or stopped) and not worker.ended:
                worker.tell({"end": True})
                worker.ended = True

        def stop_all() -> None:
            nonlocal stopped
            stopped = True
            for worker, _ in busy:
                worker.tell({"stop": True})

        async def follow(worker: _Worker, slots: int) -> None:
            while True:
                line = await worker.stdout.readline()
                if not line.endswith(b"\n"):  # EOF: it died, or cut a line short as it did
                    deaths.append(await worker.death("died during a window"))
                    stop_all()
                    return
                if line == b'{"ended":true}\n':
                    return
                try:
                    sample = Sample.model_validate_json(line)
                except ValidationError as exc:
                    worker.process.kill()
                    deaths.append(await worker.death(f"sent no sample ({exc.errors()[0]['msg']})"))
                    stop_all()
                    return
                worker.outstanding -= 1
                if not await on_done(sample) and not stopped:
                    stop_all()
                top_up(worker, slots)

        for worker, slots in busy:
            worker.ended = False
            worker.outstanding = 0
            worker.tell({"slots": slots})
            top_up(worker, slots)
        following = [asyncio.ensure_future(follow(worker, slots)) for worker, slots in busy]
        try:
            await asyncio.gather(*following)
        finally:  # the callback failed (the disk refused a sample): follow no more
            for task in following:
                task.cancel()
        if deaths:
            raise ClientFailed("; ".join(deaths))


# --- the worker process ----------------------------------------------------------------------


class _Batch:
    """One `send` inside a worker: `slots` coroutines taking requests from a local queue."""

    def __init__(self, client: Client, slots: int, out: asyncio.WriteTransport) -> None:
        self.slots = slots
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.client, self.out = client, out
        self.tasks = [asyncio.ensure_future(self._slot()) for _ in range(slots)]
        self.finished = asyncio.ensure_future(self._finish())

    async def _slot(self) -> None:
        while (job := await self.queue.get()) is not None:
            sample = Sample.model_validate(job["sample"])
            scheduled = await when_due(job.get("due_ns"), sample)
            await self.client.stream(job["api"], job["body"], sample, scheduled, job["usage"])
            self.out.write(sample.model_dump_json().encode() + b"\n")  # at once, never blocking

    async def _finish(self) -> None:
        try:
            await asyncio.gather(*self.tasks)
        except Exception:  # a bug: said on stderr, and the parent sees this process die
            traceback.print_exc()
            sys.stderr.flush()
            self.out.close()  # what it finished still reaches the parent
            asyncio.get_running_loop().call_later(1.0, os._exit, 70)
            return
        self.out.write(b'{"ended":true}\n')

    def end(self, drop_queued: bool) -> None:
        if drop_queued:
            while not self.queue.empty():
                self.queue.get_nowait()
        for _ in range(self.slots):
            self.queue.put_nowait(None)


async def _work() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    config = json.loads(await reader.readline())
    async with Client(config["url"], timeouts=Timeouts(**config["timeouts"])) as client:
        out.write(json.dumps({"ready": os.getpid()}).encode() + b"\n")
        batch: _Batch | None = None
        while line := await reader.readline():
            message = json.loads(line)
            if "slots" in message:
                batch = _Batch(client, message["slots"], out)
            elif batch is None:
                continue
            elif "job" in message:
                batch.queue.put_nowait(message["job"])
            else:  # the end of the batch's requests, or a stop (the queued ones dropped)
                batch.end(drop_queued="stop" in message)
        if batch is not None:  # the parent went away mid-batch: nobody reads what is left
            for task in batch.tasks:
                task.cancel()
    out.close()


if __name__ == "__main__":
    # Ctrl-C is the parent's to handle (its run is "interrupted", not a client that died);
    # the parent closing this process's stdin is what ends it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(_work())
