"""`kbgen bench --ray` on a real local Ray cluster of several nodes (`ray.cluster_utils.Cluster`).

Every node is a raylet on 127.0.0.1 with a custom resource that pins blocks to it; every block
starts its own paced stand-in server (tests/support/paced_server.py, a process of known speed).
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbgen.bench import command
from kbgen.bench.launch import port_taken
from kbgen.errors import InvalidInput, Mismatch, ServerFailed, UsageError
from kbgen.record import stopping
from kbgen.record.compose import from_run
from kbgen.run.folder import RunFolder
from kbgen.run.samples import Sample
from tests.support import paced_server

# read when ray.cluster_utils is imported: without it, its nodes' 127.0.0.1 becomes 192.0.2.2
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from ray.cluster_utils import Cluster  # after the variable (kbgen[dev] has ray)

pytestmark = pytest.mark.ray

PYTHON = Path(sys.executable)
NODE: dict[str, Any] = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head (no CPU for blocks) and three nodes that hold a `box` each; the third one's
    server runs the 700 tokens/s arm at 0.8 of that speed (a machine slower in one arm)."""
    made = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, **NODE},
    )
    for i in range(3):
        slower = {"PACED_SLOWER": "700=0.8"} if i == 2 else {}
        made.add_node(**NODE, resources={"box": 1}, env_vars=slower)
    made.wait_for_nodes()
    yield made
    made.shutdown()  # type: ignore[no-untyped-call]


def write_spec(
    tmp_path: Path, port: int, blocks_: int, resource: str, fast: int = 700, **workload: Any
) -> Path:
    """A spec of two arms, `base` at 500 tokens/s and `fast` at `fast`, blocks pinned to the
    nodes holding `resource`."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"class": c, "prompt": f"{c} prompt {i}"}) + "\n"
            for c in ("coding", "math")
            for i in range(8)
        )
    )
    spec = {
        "schema_version": 1,
        "id": "over-nodes",
        "title": "blocks over a local Ray cluster",
        "hypothesis": {
            "statement": "the fast arm decodes faster",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": {
            "launcher": "process",
            "command": [str(PYTHON), paced_server.__file__],
            "model": "paced",
            "port": port,
            "startup_timeout_s": 60,
        },
        "baseline": "base",
        "variants": {"base": {"args": ["--rate", "500"]}, "fast": {"args": ["--rate", str(fast)]}},
        "workload": {
            "prompts": str(prompts),
            "classes": ["coding", "math"],
            "max_tokens": 16,
            "warmup": 1,
            "repeats": 1,
            "rounds": 2,
            **workload,
        },
        "cluster": {"blocks": blocks_, "num_cpus": 1, "resources": {resource: 1}},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


def bench(spec: Path, address: str, tmp_path: Path) -> RunFolder:
    run = command.prepare(spec, None, tmp_path / "runs", address)
    command.execute(run, address, stopping.looker(run.experiment, run.folder), lambda line: None)
    return run.folder


def ok_keys(folder: RunFolder) -> list[tuple[Any, ...]]:
    return [
        (s.variant, s.prompt_class, s.prompt_index, s.repeat, s.round)
        for s in folder.samples()
        if s.ok
    ]


@pytest.fixture(scope="module")
def three_blocks(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    tmp = tmp_path_factory.mktemp("three")
    return bench(write_spec(tmp, 18810, 3, "box"), cluster.address, tmp)


def test_blocks_spread_over_the_nodes_and_the_driver_alone_keeps_their_samples(
    three_blocks: RunFolder,
) -> None:
    meta = three_blocks.meta()
    assert meta.status == "complete" and meta.cluster is not None
    nodes = [b.placements[-1].node for b in meta.cluster.blocks]
    assert len(set(nodes)) == 3  # one block a node: each node holds one box
    for block in three_blocks.blocks():
        assert block.meta().status == "complete"
        keys = ok_keys(block)
        assert len(keys) == len(set(keys)) == 2 * 2 * 16  # arms x rounds x prompts, once each
        assert block.read_log("base") and block.read_log("fast")  # the node's logs came back
    record, evidence = from_run(three_blocks, "2026-12-03-over-nodes")
    assert [m.block for m in record.machines] == [0, 1, 2]
    assert sum(m.requests for m in record.machines) == len(evidence.samples) == 3 * 64
    assert record.cost is not None and record.cost.requests == 3 * 64
    assert record.cost.starts == 3 * 3  # a block's order AB BA: three starts each
    assert {s.block for s in evidence.samples} == {0, 1, 2}


def test_a_machine_slower_in_one_arm_is_a_caveat_of_the_pooled_verdict(
    three_blocks: RunFolder,
) -> None:
    record, _ = from_run(three_blocks, "2026-12-03-over-nodes")
    assert record.verdict is not None
    caveats = " ".join(record.verdict.caveats)
    assert "machines disagree" in caveats
    for cls in ("coding", "math"):  # pooled: between the slow machine's +12% and the rest's +40%
        effect = record.verdict.per_class[cls].effect
        assert effect is not None and 0.12 < effect < 0.40


def wait_for(predicate: Any, timeout: float = 120) -> None:
    ends = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < ends, "timed out"
        time.sleep(0.2)


def count_ok(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if '"error"' not in line and line)


def test_a_node_killed_mid_block_loses_no_sample_and_its_block_runs_again_elsewhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    spares = [cluster.add_node(**NODE, resources={"spare": 1}) for _ in range(2)]
    cluster.wait_for_nodes()
    spec = write_spec(tmp_path, 18830, 1, "spare", max_tokens=64)
    run = command.prepare(spec, None, tmp_path / "runs", cluster.address)
    worker = threading.Thread(
        target=command.execute, args=(run, cluster.address, None, lambda line: None)
    )
    worker.start()
    samples = run.folder.path / "blocks" / "0" / "samples.jsonl"
    wait_for(lambda: count_ok(samples) >= 8)
    kept = [Sample.model_validate_json(line) for line in samples.read_text().splitlines()]
    placed = run.folder.meta().cluster.blocks[0].placements[-1].node  # type: ignore[union-attr]
    victim = next(n for n in spares if n.node_id == placed)
    cluster.remove_node(victim, allow_graceful=False)
    worker.join(300)
    assert not worker.is_alive()
    block = run.folder.blocks()[0]
    meta, top = block.meta(), run.folder.meta()
    assert meta.status == "complete" and meta.attempts == 2
    assert top.cluster is not None
    ends = [(p.node == placed, p.ended) for p in top.cluster.blocks[0].placements]
    assert ends == [(True, "node-lost"), (False, "complete")]
    after = block.samples()
    assert after[: len(kept)] == kept  # every sample kept before the kill is still there
    keys = ok_keys(block)
    assert len(keys) == len(set(keys)) == 2 * 2 * 16  # nothing measured twice, nothing missing
    assert {s.attempt for s in after} == {0, 1}
    record, evidence = from_run(run.folder, "2026-12-03-node-lost")
    assert record.cost is not None and record.cost.requests == len(after) == len(evidence.samples)
    assert record.machines[0].nodes[0].startswith(placed[:8])
    assert len(record.machines[0].nodes) == 2


def test_a_killed_driver_resumes_without_measuring_anything_twice(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, 18850, 2, "box", max_tokens=64)
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    kbgen = [str(PYTHON), "-m", "kbgen", "bench", "--runs", str(tmp_path / "runs")]
    driver = subprocess.Popen(
        [*kbgen, str(spec), "--ray", cluster.address],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: any((tmp_path / "runs").glob("*/blocks/1/samples.jsonl")))
    top = next((tmp_path / "runs").iterdir())
    wait_for(lambda: all(count_ok(top / f"blocks/{i}/samples.jsonl") >= 6 for i in (0, 1)))
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    before = {i: count_ok(top / f"blocks/{i}/samples.jsonl") for i in (0, 1)}
    assert all(0 < n < 64 for n in before.values())
    done = subprocess.run(
        [*kbgen, "--resume", str(top), "--ray", cluster.address],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    folder = RunFolder.open(top)
    assert folder.meta().status == "complete"
    for block in folder.blocks():
        keys = ok_keys(block)
        assert len(keys) == len(set(keys)) == 64  # each request once: none measured twice
        attempts = collections.Counter(s.attempt for s in block.samples() if s.ok)
        assert attempts[1] == 64 - attempts[0] and attempts[0] >= 6
    record, _ = from_run(folder, "2026-12-03-driver-killed")
    assert record.cost is not None and record.cost.requests >= 128


def test_a_block_whose_server_cannot_start_says_why_and_names_its_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, 18870, 1, "box")
    data = json.loads(spec.read_text())
    data["server"]["command"] = [str(PYTHON), "-c", "print('ERROR no model here'); exit(3)"]
    spec.write_text(json.dumps(data))
    run = command.prepare(spec, None, tmp_path / "runs", cluster.address)
    with pytest.raises(ServerFailed) as failed:
        command.execute(run, cluster.address, None, lambda line: None)
    message = str(failed.value)
    assert message.startswith("block 0 on node ")
    assert "exited with code 3 while starting" in message and "no model here" in message
    assert run.folder.meta().status == "failed"
    top = run.folder.meta().cluster
    assert top is not None and top.blocks[0].placements[0].ended == "failed"


def test_stopping_is_decided_centrally_over_the_blocks_and_ends_them_early(
    cluster: Cluster, tmp_path: Path
) -> None:
    # 1000 tokens/s: no node is slower at that rate
    spec = write_spec(tmp_path, 18890, 2, "box", fast=1000, rounds=6, stop="when-decided")
    folder = bench(spec, cluster.address, tmp_path)
    parts = folder.blocks()
    assert all(p.meta().status == "complete" for p in parts)
    assert any(p.meta().stopped is not None for p in parts)  # a block saw the driver decide
    record, _ = from_run(folder, "2026-12-03-stopped-over-nodes")
    assert record.cost is not None and record.cost.saved is not None
    assert record.cost.windows < record.cost.planned_windows == 2 * 12
    assert record.verdict is not None and record.verdict.outcome == "supported"


def test_a_local_cluster_and_a_head_on_loopback_keep_127_0_0_1(cluster: Cluster) -> None:
    # a driver of its own, without the variable this module sets: Ray alone would swap
    # 127.0.0.1 for this host's routable address, the head's included
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    code = (
        "import sys, ray\n"
        "from kbgen.bench import cluster\n"
        "cluster.connect(sys.argv[1])\n"
        "print(sorted({n['NodeManagerAddress'] for n in ray.nodes()}), "
        "ray.util.get_node_ip_address())\n"
    )
    for address in ("local", cluster.address):
        done = subprocess.run(
            [PYTHON, "-c", code, address], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split("\n")[-2] == "['127.0.0.1'] 127.0.0.1", address


def test_a_head_that_asks_for_a_token_is_named_as_such_and_joined_with_it(
    tmp_path: Path,
) -> None:
    token = secrets.token_hex(32)
    port = 26395  # outside the worker ports Ray takes (10002-19999)
    head_env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    head = subprocess.Popen(
        [PYTHON.parent / "ray", "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={port}", "--include-dashboard=false", "--num-cpus=0"],
        env=head_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    code = "import sys\nfrom kbgen.bench import cluster\ncluster.connect(sys.argv[1])\n"
    plain = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    try:
        for _ in range(60):
            if port_taken("127.0.0.1", port):
                break
            time.sleep(0.5)
        refused = subprocess.run(
            [PYTHON, "-c", code, f"127.0.0.1:{port}"],
            env={**plain, "RAY_AUTH_TOKEN_PATH": str(tmp_path / "none")},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode != 0
        assert f"cannot reach the Ray cluster '127.0.0.1:{port}': it asks for a token" in (
            refused.stderr
        )
        assert token not in refused.stderr + refused.stdout
        for wrong in (
            {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)},
            {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tmp_path / "none")},
        ):
            done = subprocess.run(
                [PYTHON, "-c", code, f"127.0.0.1:{port}"],
                env={**plain, **wrong},
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            said = f"ServerFailed: cannot reach the Ray cluster '127.0.0.1:{port}': its token is"
            assert done.returncode != 0 and said in done.stderr, done.stderr[-1500:]
            assert token not in done.stderr + done.stdout
        joined = subprocess.run(
            [PYTHON, "-c", code, f"127.0.0.1:{port}"],
            env={**plain, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert joined.returncode == 0, joined.stderr[-2000:]
    finally:
        head.terminate()  # `ray start --block` stops what it started
        head.wait(60)


def test_racing_is_decided_centrally_and_a_dropped_setting_stops_on_every_block(
    cluster: Cluster, tmp_path: Path
) -> None:
    # a sweep's two settings on every block: 300 tokens/s refuted at the first look that may
    # decide, 525 at the minimum effect (undecided): only the first leaves, on both blocks
    spec = write_spec(tmp_path, 18990, 2, "box", rounds=4, stop="when-decided")
    data = json.loads(spec.read_text())
    data["sweep"] = {"fast.args.--rate": [300, 525]}
    for arm in data["variants"].values():  # intervals as wide as a real server's
        arm["args"] += ["--spread", "0.1"]  # (a noiseless one decides 525 on its overhead)
    spec.write_text(json.dumps(data))
    folder = bench(spec, cluster.address, tmp_path)
    meta = folder.meta()
    slow = next(v for v in meta.dropped)
    assert list(meta.dropped) == [slow] and "300" in slow
    for part in folder.blocks():
        rounds: dict[str, set[int]] = collections.defaultdict(set)
        for s in part.samples():
            rounds[s.variant].add(s.round or 0)
        assert rounds[slow] < rounds["base"] == {0, 1, 2, 3}  # left the race, on this block too
        assert max(rounds[slow]) <= meta.dropped[slow].round
    record, _ = from_run(folder, "2026-12-03-raced-over-nodes")
    assert record.verdict is not None
    cells = {c.variant: c.outcome for c in record.verdict.cells}
    assert cells[slow] == "refuted"


SECRET = "sk-live-4f9c2a7e1b3d5f6a8c0e2b4d6f8a1c3e"  # a key's shape: masked wherever it is seen


def test_a_secret_reaches_a_node_from_its_own_environment_and_is_masked_in_all_written(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.add_node(**NODE, resources={"vault": 1}, env_vars={"PACED_SECRET": SECRET})
    cluster.wait_for_nodes()
    assert "PACED_SECRET" not in os.environ  # the driver never holds it
    spec = write_spec(tmp_path, 18950, 1, "vault")
    data = json.loads(spec.read_text())
    data["server"]["env"] = {"PACED_KEY": "${PACED_SECRET}"}
    spec.write_text(json.dumps(data))
    folder = bench(spec, cluster.address, tmp_path)
    log = folder.blocks()[0].read_log("base")
    assert log is not None and "key: " in log  # the server had it, and said it
    for path in folder.path.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert "${PACED_SECRET}" in (folder.path / "blocks" / "0" / "spec.yaml").read_text()


def test_a_secret_written_in_the_spec_does_not_travel_and_no_folder_is_made(
    tmp_path: Path,
) -> None:
    spec = write_spec(tmp_path, 18960, 1, "box")
    data = json.loads(spec.read_text())
    data["server"]["env"] = {"PACED_KEY": SECRET}
    spec.write_text(json.dumps(data))
    with pytest.raises(InvalidInput) as refused:
        command.prepare(spec, None, tmp_path / "runs", "auto")
    assert "does not travel to a cluster's nodes" in str(refused.value.problems[0])
    assert refused.value.problems[0].line is not None
    assert not (tmp_path / "runs").exists()


def test_nodes_of_different_accelerators_are_refused_before_any_block_starts(
    cluster: Cluster, tmp_path: Path
) -> None:
    for kind in ("A100", "H200"):
        cluster.add_node(**NODE, resources={"mixed": 1, f"accelerator_type:{kind}": 1})
    cluster.wait_for_nodes()
    run = command.prepare(write_spec(tmp_path, 18970, 2, "mixed"), None, tmp_path, cluster.address)
    with pytest.raises(UsageError, match=r"differ in hardware .*A100.*H200"):
        command.execute(run, cluster.address, None, lambda line: None)
    assert all(not b.samples() for b in run.folder.blocks())


def test_blocks_on_different_hardware_are_refused_by_the_record(
    three_blocks: RunFolder, tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(three_blocks.path, copy)
    block = RunFolder(copy / "blocks" / "1")
    meta = block.meta()
    assert meta.hardware is not None
    meta.hardware = meta.hardware.model_copy(update={"accelerator": "NVIDIA H100", "count": 1})
    block.write_meta(meta)
    with pytest.raises(Mismatch, match=r"different hardware.*block 1: NVIDIA H100"):
        from_run(RunFolder(copy), "2026-12-03-unlike")
    record, _ = from_run(RunFolder(copy), "2026-12-03-unlike", allow_mismatch=True)
    assert record.machines[1].hardware is not None
    assert record.machines[1].hardware.accelerator == "NVIDIA H100"


def test_blocks_on_two_gpus_of_one_node_are_alike_and_each_names_its_gpu(
    three_blocks: RunFolder, tmp_path: Path
) -> None:
    """Ray gives each block's task its own GPU (its `CUDA_VISIBLE_DEVICES`): which one is the
    block's own, not a difference of hardware; the pooled record's machine names none."""
    from kbgen.site import render

    copy = tmp_path / "run"
    shutil.copytree(three_blocks.path, copy)
    gpu = {"accelerator": "NVIDIA H200", "count": 1, "accelerator_memory_gib": 140.4}
    for i, block in enumerate(RunFolder(copy).blocks()):
        meta = block.meta()
        assert meta.hardware is not None
        meta.hardware = meta.hardware.model_copy(update={**gpu, "devices": [i % 2]})
        block.write_meta(meta)
    record, _ = from_run(RunFolder(copy), "2026-12-03-two-gpus")
    assert record.config is not None and record.config.hardware.devices is None
    assert [m.hardware.devices for m in record.machines if m.hardware] == [[0], [1], [0]]
    page = "\n".join(render.record_pages(render.environment(None), record, "r.yaml", {}).values())
    rows = [line for line in page.splitlines() if "NVIDIA H200 (140.4 GiB), GPU" in line]
    assert [row.split("GPU ")[1][0] for row in rows] == ["0", "1", "0"]
