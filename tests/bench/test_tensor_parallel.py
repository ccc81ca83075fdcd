"""A tensor-parallel server, for real: vLLM's CPU build on the tiny model with two ranks (a core
each), as kbgen's process launcher starts it — one API server, its engine core and a worker
process per rank. Its log names the layout; stopping it leaves none of its processes behind
(each rank holds a GPU's memory on a GPU machine: a rank left over fails the next start)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import psutil
import pytest

from kbgen.bench import effective, logline
from kbgen.bench.launch import ProcessLauncher
from kbgen.kb.models import Variant
from kbgen.run.spec import ProcessServer
from kbgen.site.formats import parallel_layout
from tests.support import vllm_env
from tests.support.free_port import free_port
from tests.support.processes import still_running

FIXTURE = Path(__file__).parents[1] / "fixtures" / "vllm-logs" / "cpu-0.32-tp2.log"


@pytest.mark.integration  # a real vLLM server of two ranks
def test_a_tensor_parallel_server_starts_names_its_layout_and_stops_with_every_rank(
    tmp_path: Path,
) -> None:
    python = vllm_env.require()
    cores = sorted(os.sched_getaffinity(0))  # those this process may run on, not 0…N-1
    server = ProcessServer(
        launcher="process",
        command=[str(python), str(vllm_env.CLI), "serve"],
        model=str(vllm_env.TINY),
        args=[
            *("--max-model-len", "2048", "--dtype", "bfloat16", "--enforce-eager"),
            *("--served-model-name", "tiny", "--tensor-parallel-size", "2"),
        ],
        # a rank per core (vLLM's CPU build binds each rank's threads to a NUMA node of its
        # own unless told: this machine has one); its message queue on loopback
        env={"VLLM_CPU_OMP_THREADS_BIND": f"{cores[0]}|{cores[-1]}", "VLLM_HOST_IP": "127.0.0.1"},
        port=free_port(),
        startup_timeout_s=600,
    )
    launcher = ProcessLauncher(server)
    log = tmp_path / "tp.log"

    async def run() -> dict[int, str]:
        try:
            launched = await launcher.start("tp", Variant(), log, lambda s: None)
            assert launched.pid is not None and launched.startup_s is not None
            tree = psutil.Process(launched.pid).children(recursive=True)
            return {p.pid: p.name() for p in tree}
        finally:
            await launcher.stop()

    tree = asyncio.run(run())
    names, pids = list(tree.values()), list(tree)
    assert sum(name.startswith("VLLM::Worker_TP") for name in names) == 2, names
    assert any(name.startswith("VLLM::EngineCor") for name in names), names
    assert still_running(pids) == []

    text = log.read_text()
    lines = [logline.parse(i, line) for i, line in enumerate(text.splitlines(), 1)]
    settings = effective.of_lines(lines)
    assert settings is not None
    assert settings.args["tensor_parallel_size"] == 2
    assert settings.config["tensor_parallel_size"] == "2"
    assert parallel_layout({"tp": settings}) == "tensor-parallel 2"
    ranks = {line.pid for line in lines if line.process.startswith("Worker_TP")}
    assert len(ranks) == 2  # each rank's lines its own process's
    [startup] = settings.startup
    assert startup["weights_s"] >= 0 and startup["engine_init_s"] > 0
    assert "mq_connect_ip=127.0.0.1" in text  # nothing left loopback


def test_a_recorded_tensor_parallel_log_gives_its_layout_and_its_start_up() -> None:
    """The log of the server above as it ran here once (`FIXTURE`): each rank a process of its
    own, the engine config's sizes, the start-up of the first rank to report each phase."""
    lines = [logline.parse(i, line) for i, line in enumerate(FIXTURE.read_text().splitlines(), 1)]
    settings = effective.of_lines(lines)
    assert settings is not None
    assert {k: settings.config[k] for k in ("tensor_parallel_size", "pipeline_parallel_size")} == {
        "tensor_parallel_size": "2",
        "pipeline_parallel_size": "1",
    }
    assert settings.startup == [{"weights_s": 0.01, "engine_init_s": 2.64}]
    assert settings.behaviour == {"model_runner": "V1"}
    processes = {(line.process, line.pid) for line in lines if line.pid}
    assert {name for name, _ in processes} >= {
        "APIServer",
        "EngineCore",
        "Worker_TP0",
        "Worker_TP1",
    }
