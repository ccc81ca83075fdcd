"""A run's blocks on a cluster: each a run folder of its own, measured on a node.

A block is every round of every arm on one node, with its own server there. The driver alone
writes: its run folder holds `blocks/<i>/`, each an ordinary run folder; a node measures into a
scratch copy (`Node`) whose every write comes back as a message that the driver applies to its
copy (`apply`). Layout, faults and what a node needs: docs/design.md, "Scale-out".
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kbgen import errors, redact
from kbgen.bench import driver, provenance
from kbgen.bench.launch import Launched, Launcher, Waiting, launcher_for, port_taken
from kbgen.errors import KbgenError, UsageError
from kbgen.kb import files, store
from kbgen.kb.models import Variant
from kbgen.run import design
from kbgen.run.folder import RunFolder, sample_line
from kbgen.run.models import Block, Cluster, RunMeta
from kbgen.run.samples import Sample
from kbgen.run.spec import ExperimentSpec, ProcessServer, load

Message = tuple[str, str, bytes]  # (kind, name, data): what a node's block sends the driver
Emit = Callable[[Message], None]
BLOCKS = "blocks"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,200}")  # a metrics file or variant a node names


def block_spec(text: str, spec: ExperimentSpec, index: int) -> str:
    """Block `index`'s spec: the run's (its `cluster` section gone), its server on the spec's
    port + `index`, its order seeded by `order_seed` + `index` (blocks differ in their orders)."""
    tree = store.parse_text(text)
    tree.pop("cluster", None)
    if isinstance(spec.server, ProcessServer):
        store.merge(tree, {"server": {"port": spec.server.port + index}})
    store.merge(tree, {"workload": {"order_seed": spec.workload.order_seed + index}})
    return store.dump(tree)


def check(spec: ExperimentSpec) -> None:
    """UsageError unless `spec` can run over a cluster: a `cluster` section, and a `process`
    server (each block starts its own on its node: a server kbgen does not start cannot be
    one per node), its ports free of the 65,535 limit."""
    if spec.cluster is None:
        raise UsageError(
            "--ray needs the spec's `cluster` section (how many blocks, and what a block's node "
            "must have)"
        )
    if not isinstance(spec.server, ProcessServer):
        raise UsageError(
            f"--ray needs `server.launcher: process`, not {spec.server.launcher!r}: every block "
            "starts its own server on its node"
        )
    if spec.server.port + spec.cluster.blocks - 1 > 65535:
        raise UsageError(f"{spec.cluster.blocks} blocks from port {spec.server.port} pass 65535")


def create(top: RunFolder, spec: ExperimentSpec, address: str) -> RunFolder:
    """`top`, a new run folder, made the driver's copy of a run over a cluster: a folder per
    block under `blocks/` with its spec and its run.json (no machine yet: its node says)."""
    assert spec.cluster is not None
    meta = top.meta()
    text = top.spec_path.read_text()  # secrets already masked
    listed = []
    for index in range(spec.cluster.blocks):
        path = top.path / BLOCKS / str(index)
        (path / "metrics").mkdir(parents=True)
        (path / "logs").mkdir()
        written = block_spec(text, spec, index)
        files.write_atomic(path / "spec.yaml", written.encode())
        mine = load(path / "spec.yaml", spec.folder)
        RunFolder(path).write_meta(
            meta.model_copy(
                update={
                    "hardware": None,
                    "software": None,
                    "order": design.windows(mine),
                    "order_seed": mine.workload.order_seed,
                }
            )
        )
        listed.append(Block(index=index, path=f"{BLOCKS}/{index}"))
    meta.hardware = None  # each node's own is in its block's run.json
    meta.software = None
    meta.order = []
    meta.cluster = Cluster(address=redact.text(address), blocks=listed)
    top.write_meta(meta)
    return top


def apply(folder: RunFolder, variants: set[str], message: Message) -> None:
    """Apply a node's message to the driver's block folder: run.json replaced, a sample
    appended, a `/metrics` scrape written, a server log's next bytes appended. A name that is
    not a plain file name, or a variant the spec lacks, is refused (no path from a node)."""
    kind, name, data = message
    if kind == "meta":
        files.write_atomic(folder.path / "run.json", data)
    elif kind == "sample":
        folder.append(Sample.model_validate_json(data))
    elif kind == "metrics" and _NAME.fullmatch(name) and "/" not in name:
        files.write_atomic(folder.path / "metrics" / f"{name}.prom", data)
    elif kind == "log" and name in variants:
        with folder.log(name).open("ab") as log:
            log.write(data)
    else:
        raise errors.ServerFailed(f"a node sent {kind!r} for {name!r}: not a message kbgen sends")


class Mirror(RunFolder):
    """A node's scratch copy of a block folder: every write also goes out as a message."""

    def __init__(self, path: Path, emit: Emit) -> None:
        super().__init__(path)
        self.emit = emit
        self.sent: dict[str, int] = {}  # bytes of each server log sent so far

    def write_meta(self, meta: RunMeta) -> None:
        super().write_meta(meta)
        self.emit(("meta", "", (self.path / "run.json").read_bytes()))

    def append(self, sample: Sample) -> None:
        super().append(sample)
        self.emit(("sample", "", sample_line(sample).encode()))

    def write_metrics(self, name: str, text: str) -> Path:
        path = super().write_metrics(name, text)
        self.emit(("metrics", name, path.read_bytes()))
        return path

    def logs(self) -> list[Message]:
        """The server logs' bytes written since the last call (the launcher writes them); one
        thread calls it (the block's task), so no byte is sent twice."""
        out: list[Message] = []
        for log in sorted((self.path / "logs").glob("*.log")):
            variant = log.name.removesuffix(".log")
            with log.open("rb") as f:
                f.seek(self.sent.get(variant, 0))
                data = f.read()
            if data:
                self.sent[variant] = self.sent.get(variant, 0) + len(data)
                out.append(("log", variant, data))
        return out


@dataclass
class Node:
    """One attempt of a block on the node it landed on: its scratch folder, and its run."""

    spec_text: str
    meta: bytes
    samples: bytes
    emit: Emit
    label: str | None = None
    shared: bool = False  # blocks share this node's GPU (`cluster.num_gpus` < 1)
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kbgen-block-")))

    def __post_init__(self) -> None:
        for name in ("metrics", "logs"):
            (self.scratch / name).mkdir()
        (self.scratch / "spec.yaml").write_text(self.spec_text)
        (self.scratch / "run.json").write_bytes(self.meta)
        (self.scratch / "samples.jsonl").write_bytes(self.samples)
        self.folder = Mirror(self.scratch, self.emit)

    def run(
        self,
        suite: dict[str, list[str]],
        look: design.Look | None,
        listen: design.Listen | None = None,
    ) -> None:
        """Measure what the block still lacks, on this node; a kbgen error goes to the driver
        as a `failed` message (its class and line), not as a traceback."""
        try:
            _full_priority()
            spec = self.folder.spec()
            meta = self.folder.meta()
            label = provenance.label(self.label)
            meta.hardware, gpu_driver = provenance.server_hardware(spec.server, label)
            meta.software = provenance.software(spec, gpu_driver)
            meta.host_label = label
            self.folder.write_meta(meta)
            if isinstance(spec.server, ProcessServer):  # a lost attempt's server may be ending
                _wait_free(spec.server.host, spec.server.port)
            launcher = Tethered(launcher_for(spec.server, spec.folder), self.shared)
            # asyncio's own loop: a Ray worker beside vLLM has uvloop's policy, whose loops'
            # subprocesses know no `process_group` (the server's workers are stopped with it)
            asyncio.set_event_loop_policy(None)
            events = driver.NoEvents()
            asyncio.run(driver.measure(spec, self.folder, events, launcher, suite, look, listen))
            self.emit(("done", "", b""))
        except KbgenError as exc:
            self.emit(("failed", type(exc).__name__, str(exc).encode()))
        except BaseException as exc:  # a bug, said as one where it happened, not lost with a thread
            where = traceback.extract_tb(exc.__traceback__)[-1]
            said = f"internal error: {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
            self.emit(("failed", "ServerFailed", said.encode()))

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def failure(kind: str, message: str) -> KbgenError:
    """The kbgen error a node's `failed` message names (a ServerFailed if it names none)."""
    found: object = getattr(errors, kind, None)
    if (
        isinstance(found, type)
        and issubclass(found, KbgenError)
        and found is not KbgenError
        and found.__init__ is KbgenError.__init__  # one that takes its problems: the line will do
    ):
        return found(message)
    return errors.ServerFailed(message)


def _full_priority() -> None:
    """Run at the node's normal priority: Ray starts its workers at niceness 15 (then the
    server and the client it times would yield to every other process); UsageError where it
    may not be lowered."""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    if niceness <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except PermissionError as exc:
        raise UsageError(
            f"this node's Ray workers run at niceness {niceness}, which times the server "
            "behind every other process: start the node with RAY_worker_niceness=0 "
            "(RAY_worker_niceness=0 ray start ...)"
        ) from exc


def _wait_free(host: str, port: int, seconds: float = 15) -> None:
    """Until `port` is free, for at most `seconds`: a node's lost attempt on this host takes
    its server down within a second (`Tethered`); the launcher names a port still taken."""
    ends = time.monotonic() + seconds
    while port_taken(host, port) and time.monotonic() < ends:
        time.sleep(0.25)


# Kills the server's process group once the process that started it is gone (then exits).
_WATCH = """
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
def there(kill):
    try:
        kill(0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
while there(lambda s: os.kill(parent, s)):
    if not there(lambda s: os.killpg(group, s)):
        sys.exit()
    time.sleep(0.5)
if there(lambda s: os.killpg(group, s)):
    os.killpg(group, signal.SIGKILL)
"""


class Tethered:
    """A launcher whose servers die with the process that started them: a node's worker that
    is killed takes its server along, instead of leaving it holding the GPU and the port.

    With `shared` (blocks that share a GPU), a start waits until no other block's server on
    this GPU is starting: a vLLM that profiles its memory while another allocates counts the
    other's memory as its own. The wait is not start-up time (it is measured inside)."""

    def __init__(self, inner: Launcher, shared: bool = False) -> None:
        self.inner = inner
        self.watchers: list[subprocess.Popen[bytes]] = []
        self.lock: Path | None = None
        if shared:
            gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "-")
            self.lock = Path(tempfile.gettempdir()) / f"kbgen-gpu-{gpus}.start.lock"

    async def start(self, name: str, variant: Variant, log: Path, waiting: Waiting) -> Launched:
        if self.lock is None:
            launched = await self.inner.start(name, variant, log, waiting)
        else:
            with self.lock.open("a") as held:
                await asyncio.to_thread(fcntl.flock, held, fcntl.LOCK_EX)  # released on close
                launched = await self.inner.start(name, variant, log, waiting)
        if not launched.reused and launched.pid is not None:
            self.watchers.append(
                subprocess.Popen(
                    [sys.executable, "-c", _WATCH, str(os.getpid()), str(launched.pid)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # outlives this process: that is its job
                )
            )
        return launched

    async def stop(self) -> None:
        await self.inner.stop()
        for watcher in self.watchers:  # their servers are gone: so are they, within 0.5 s
            with contextlib.suppress(subprocess.TimeoutExpired):
                watcher.wait(timeout=5)
        self.watchers.clear()

    def alive(self) -> bool:
        return self.inner.alive()
