"""`kbgen bench --ray`: a run's blocks as Ray tasks, one per node, streamed back to the driver.

The one module that imports Ray (the `kbgen[ray]` extra). Each block is a streaming task that
measures on its node (`blocks.Node`) and yields what it writes; the driver applies it to its own
run folder, reruns a block whose node died from where it was, and decides stopping centrally.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kbgen import redact
from kbgen.bench import blocks, driver
from kbgen.errors import KbgenError, ServerFailed, UsageError
from kbgen.run import design
from kbgen.run.folder import RunFolder
from kbgen.run.models import Dropped, Placement
from kbgen.run.spec import ClusterSpec, ExperimentSpec

try:
    import ray
    import ray._private.ray_constants
    import ray.exceptions
except ImportError as exc:  # pragma: no cover -- kbgen without its ray extra
    raise UsageError("--ray needs Ray: pip install 'kbgen[ray]'") from exc

LABEL_ENV = "KBGEN_HOST_LABEL"  # a node's host label, set where its `ray start` runs
LOG_EVERY_S = 1.0  # a block sends its server logs' new lines at most this often
Say = Callable[[str], None]


def connect(address: str) -> None:
    """Join (or, for `local`, start) the cluster `address` names: `local`, `auto` (the one
    `RAY_ADDRESS` or `ray start` names), `ray://HOST:PORT`, or a head's HOST:PORT. A local
    cluster, or a head on 127.0.0.1, stays on 127.0.0.1 (no dashboard for a local one)."""
    options: dict[str, Any] = {"log_to_driver": False}
    if address == "local" or address.split(":")[0] in ("127.0.0.1", "localhost"):
        # Ray on Linux swaps a loopback address for this host's routable one, the head's
        # included; its macOS rule keeps loopback (the constant its environment variable
        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 sets, read when Ray is imported: too early here)
        ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
        options["_node_ip_address"] = "127.0.0.1"
    if address == "local":
        os.environ.setdefault("RAY_worker_niceness", "0")  # its workers at full priority
        options["include_dashboard"] = False
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.AuthenticationError) as exc:
        raise ServerFailed(f"cannot reach the Ray cluster {address!r}: {_why(exc)}") from exc


def _why(exc: BaseException) -> str:
    """Why `ray.init` failed, in a line: a token problem named as one (Ray puts it in the
    message of a RuntimeError, or raises it before it connects), else its own message."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ray.exceptions.AuthenticationError) or "InvalidAuthToken" in str(
            cause
        ):
            if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
                return (
                    "its token is not the one found here (~/.ray/auth_token, RAY_AUTH_TOKEN or "
                    "RAY_AUTH_TOKEN_PATH): give the head's"
                )
            return (
                "it asks for a token (Ray's token authentication): set RAY_AUTH_MODE=token, "
                "with the head's token in ~/.ray/auth_token or RAY_AUTH_TOKEN"
            )
        cause = cause.__cause__
    return str(exc)


def check_hosts(cluster: ClusterSpec) -> None:
    """UsageError unless some live node can run a block, and all that can are of one kind of
    accelerator. Nodes of
    different kinds of accelerator: a pooled effect over different hardware answers no one
    question (pin one kind with `cluster.resources`, and run an experiment per kind)."""
    wanted = {**cluster.resources, "CPU": cluster.num_cpus, "GPU": cluster.num_gpus or 0}
    fit = [
        node
        for node in ray.nodes()  # type: ignore[no-untyped-call]
        if node.get("Alive")
        and all(node["Resources"].get(k, 0) >= v for k, v in wanted.items() if v > 0)
    ]
    if not fit:
        asked = ", ".join(f"{k}={v:g}" for k, v in wanted.items() if v > 0) or "nothing"
        raise UsageError(f"no live node of the Ray cluster has what a block asks for ({asked})")
    kinds = {
        tuple(sorted(k for k in node["Resources"] if k.startswith("accelerator_type:")))
        for node in fit
    }
    if len(kinds) > 1:
        named = "; ".join(", ".join(k) or "no accelerator" for k in sorted(kinds))
        raise UsageError(
            f"the nodes a block can run on differ in hardware ({named}): kbgen pools blocks of "
            "one kind of machine only; pin one kind with cluster.resources and run an experiment "
            "per kind"
        )


@ray.remote(num_cpus=0)
class _Board:
    """What the driver's latest look decided, for the blocks to read at their own looks."""

    def __init__(self) -> None:
        self.decided, self.drop = False, dict[str, str]()

    def post(self, decided: bool, drop: dict[str, str]) -> None:
        self.decided, self.drop = decided, {**self.drop, **drop}

    def read(self) -> tuple[bool, dict[str, str]]:
        return self.decided, self.drop


@ray.remote(max_retries=0, num_returns="streaming")  # kbgen reruns a lost block itself
def _block(
    spec_text: str,
    meta: bytes,
    samples: bytes,
    suite: dict[str, list[str]],
    board: Any,
    shared: bool,
) -> Iterator[list[blocks.Message]]:
    """One attempt of a block on this node: its messages, in batches, as they come."""
    out: queue.Queue[blocks.Message | None] = queue.Queue()
    label = os.environ.get(LABEL_ENV)
    node = blocks.Node(spec_text, meta, samples, out.put, label, shared=shared)

    def look(round_: int) -> design.Looked:
        out.put(("look", "", str(round_).encode()))
        return listen()

    def listen() -> design.Looked:
        decided, drop = ray.get(board.read.remote())
        return design.Looked(decided, drop)

    context = ray.get_runtime_context()
    yield [("node", context.get_node_id(), (os.environ.get(LABEL_ENV) or "").encode())]

    def measure() -> None:
        try:
            node.run(suite, look, listen)
        finally:
            out.put(None)

    threading.Thread(target=measure, daemon=True).start()
    try:
        done, logged = False, 0.0
        while not done:
            batch: list[blocks.Message] = []
            try:
                item = out.get(timeout=LOG_EVERY_S)
                while item is not None:
                    batch.append(item)
                    item = out.get_nowait()
                done = True
            except queue.Empty:
                pass
            if done or time.monotonic() >= logged + LOG_EVERY_S:  # this thread alone reads them
                batch += node.folder.logs()
                logged = time.monotonic()
            if batch:
                yield batch
    finally:
        node.close()


class _Driver:
    """The driver of one `kbgen bench --ray` invocation: a thread per block it still needs."""

    def __init__(
        self,
        spec: ExperimentSpec,
        top: RunFolder,
        suite: dict[str, list[str]],
        look: design.Look | None,
        say: Say,
    ) -> None:
        assert spec.cluster is not None
        self.top, self.suite, self.say = top, suite, say
        self.cluster = spec.cluster
        self.look = look if design.design_of(spec.workload) else None
        self.lock = threading.Lock()  # the top run.json
        self.looking = threading.Lock()
        self.board = _Board.remote()  # type: ignore[attr-defined]
        self.running: dict[int, Any] = {}  # block -> its generator
        self.placed: set[int] = set()  # blocks whose node has said so
        self.failures: list[BaseException] = []
        self.decided = False

    def all_blocks(self) -> None:
        folders = self.top.blocks()
        todo = [i for i, f in enumerate(folders) if f.meta().status != "complete"]
        threads = [threading.Thread(target=self.guarded, args=(i,)) for i in todo]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.5)
        except BaseException:
            self.cancel()
            raise
        if self.failures:
            raise self.failures[0]

    def guarded(self, index: int) -> None:
        try:
            self.block(index)
        except BaseException as exc:
            self.failures.append(exc)
            self.cancel()

    def cancel(self, unplaced_only: bool = False) -> None:
        for index, generator in list(self.running.items()):
            if not unplaced_only or index not in self.placed:
                ray.cancel(generator, force=True)

    def block(self, index: int) -> None:
        folder = self.top.blocks()[index]
        spec = folder.spec()
        lost = 0
        while True:
            placements = self.placements(index)
            if placements:  # a block's next attempt: a resume of its folder
                folder.update_meta(status="running", attempts=folder.meta().attempts + 1)
            if self.decided:
                break
            attempt = folder.meta().attempts - 1
            try:
                self.attempt(index, folder, spec, attempt)
            except ray.exceptions.TaskCancelledError:
                self.ended(index, "cancelled")
                if self.decided:
                    break
                raise
            except ray.exceptions.RayTaskError:
                self.ended(index, "failed")
                raise
            except ray.exceptions.RayError as exc:  # its node or worker died
                self.ended(index, "node-lost")
                lost += 1
                if lost > self.cluster.retries:
                    raise ServerFailed(
                        f"block {index} lost its node {lost} times (cluster.retries is "
                        f"{self.cluster.retries}): {type(exc).__name__}; its samples so far are "
                        f"kept in {folder.path}. Continue with: kbgen bench --resume "
                        f"{self.top.path} --ray ..."
                    ) from exc
                self.say(f"block {index}: its node was lost; it runs again, from where it was")
                continue
            self.ended(index, "complete")
            break
        driver.finish(spec, folder)

    def attempt(self, index: int, folder: RunFolder, spec: ExperimentSpec, attempt: int) -> None:
        """One attempt of block `index` on whichever node Ray gives it, applied as it comes; a
        node's error raised once its last messages (its server's last lines) are applied."""
        folder.close()
        samples = folder.path / "samples.jsonl"
        generator: Any = _block.options(
            num_cpus=self.cluster.num_cpus,
            num_gpus=self.cluster.num_gpus or 0,
            resources=dict(self.cluster.resources),
        ).remote(
            folder.spec_path.read_text(),
            (folder.path / "run.json").read_bytes(),
            samples.read_bytes() if samples.exists() else b"",
            self.suite,
            self.board,
            0 < (self.cluster.num_gpus or 0) < 1,
        )
        self.running[index] = generator
        variants = set(spec.variants)
        node, finished = "?", False
        failed: KbgenError | None = None
        try:
            for ref in generator:
                for kind, name, data in ray.get(ref):
                    if kind == "done":
                        finished = True
                    elif kind == "node":
                        node = self.placed_on(index, name, data.decode() or None, attempt)
                    elif kind == "failed":
                        failed = blocks.failure(
                            name, f"block {index} on node {node}: {data.decode()}"
                        )
                    elif kind == "look":
                        self.looked(int(data))
                    else:
                        blocks.apply(folder, variants, (kind, name, data))
            if failed is not None:
                raise failed
            if not finished:
                raise ServerFailed(
                    f"block {index} on node {node} ended without finishing or saying why "
                    "(the node's Ray worker log may)"
                )
        except KbgenError:
            self.ended(index, "failed")
            raise
        finally:
            folder.close()
            self.running.pop(index, None)

    def placements(self, index: int) -> list[Placement]:
        cluster = self.top.meta().cluster
        assert cluster is not None
        return cluster.blocks[index].placements

    def placed_on(self, index: int, node: str, label: str | None, attempt: int) -> str:
        with self.lock:
            meta = self.top.meta()
            assert meta.cluster is not None
            masked = None if label is None else redact.text(label)
            block = meta.cluster.blocks[index]
            new = Placement(node=node, label=masked, attempt=attempt, ended="running")
            block.placements = [*block.placements, new]  # assigned: run.json keeps what is set
            self.top.write_meta(meta)
        self.placed.add(index)
        self.say(f"block {index}: attempt {attempt + 1} on node {new.named}")
        return new.named

    def ended(self, index: int, how: str) -> None:
        with self.lock:
            meta = self.top.meta()
            assert meta.cluster is not None
            placements = meta.cluster.blocks[index].placements
            if placements and placements[-1].ended == "running":
                placements[-1].ended = how  # type: ignore[assignment]
                self.top.write_meta(meta)

    def looked(self, round_: int) -> None:
        """A block looked: look at every block's samples so far (one look at a time), post
        what it found, and cancel the blocks not yet begun once everything is decided."""
        if self.look is None or not self.looking.acquire(blocking=False):
            return
        try:
            found = self.look(round_)
            if found.drop:
                with self.lock:
                    meta = self.top.meta()
                    new = {n: Dropped(round=round_, why=w) for n, w in found.drop.items()}
                    meta.dropped = {**new, **meta.dropped}
                    self.top.write_meta(meta)
            ray.get(self.board.post.remote(found.decided, found.drop))
            if found.decided and not self.decided:
                self.decided = True
                self.cancel(unplaced_only=True)
        finally:
            self.looking.release()


def run(
    spec: ExperimentSpec,
    top: RunFolder,
    address: str,
    suite: dict[str, list[str]],
    look: design.Look | None = None,
    say: Say = lambda line: None,
) -> list[RunFolder]:
    """Measure every block of `top` that is not complete on the cluster at `address`; the
    block folders, each finished (summary.json, complete), and `top` complete."""
    assert spec.cluster is not None
    connect(address)
    try:
        check_hosts(spec.cluster)
        _Driver(spec, top, suite, look, say).all_blocks()
    finally:
        ray.shutdown()
    finished = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    top.update_meta(status="complete", finished=finished)
    return top.blocks()
