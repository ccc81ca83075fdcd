"""bench/gpu/run.sh's `background` and `wait`: a wait brings back the steps' own newest run (not
a file an earlier job left), whole, and one stopped before its end (the machine's limit, the
session's GPU time) leaves what it had copied in OUT_DIR."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import vllm_env

SCRIPT = vllm_env.REPO / "bench" / "gpu" / "run.sh"
Run = Callable[..., subprocess.CompletedProcess[str]]  # run.sh ARGS…, timeout=
Machine = tuple[Run, Path]
A_RUN = 'mkdir -p "$RUNS/r1" && echo 1 > "$RUNS/r1/run.json"'  # a run folder, as kbgen's begins


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    """run.sh with its background folder and run folders under tmp_path, looking every second and
    copying every 2; stops what it started."""
    env = {**os.environ, "BG": str(tmp_path / "bg"), "RUNS": str(tmp_path / "runs")}
    env |= {"WAIT_TICK": "1", "WAIT_EVERY": "2"}

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), *args], env=env, text=True, capture_output=True, timeout=timeout
        )

    yield run, tmp_path
    pid = tmp_path / "bg" / "pid"
    if pid.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid.read_text()), signal.SIGKILL)


def _members(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return set(tar.getnames())


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _until(path: Path) -> None:
    for _ in range(200):
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_a_second_job_brings_back_its_own_run(machine: Machine) -> None:
    run, tmp = machine
    # the first job as `run.sh bench` ends: its run folder, and that run packed into /tmp/bg/out
    first = A_RUN + ' && tar -C "$RUNS" -czf "$BG/out/spec.run.tar.gz" r1'
    assert run("background", first).returncode == 0
    _until(tmp / "bg" / "rc")
    assert run("wait", str(tmp / "out1"), "10").returncode == 0
    assert _names(tmp / "out1") == ["background.log", "spec.run.tar.gz"]
    # the second goes on past its wait
    second = 'mkdir -p "$RUNS/r2" && echo 2 > "$RUNS/r2/run.json" && sleep 30'
    assert run("background", second).returncode == 0
    _until(tmp / "runs" / "r2" / "run.json")
    waited = run("wait", str(tmp / "out2"), "1")
    assert waited.returncode == 0, waited.stderr
    assert "go on" in waited.stdout
    assert _names(tmp / "out2") == ["background.log", "r2.run.tar.gz"]
    assert _members(tmp / "out2" / "r2.run.tar.gz") == {"r2", "r2/run.json"}


def test_a_wait_cut_short_leaves_what_it_had(machine: Machine) -> None:
    run, tmp = machine
    assert run("background", A_RUN + " && sleep 60").returncode == 0
    with pytest.raises(subprocess.TimeoutExpired):
        run("wait", str(tmp / "out"), "60", timeout=6)  # its first copy at 2 s
    assert _names(tmp / "out") == ["background.log", "r1.run.tar.gz"]
    assert _members(tmp / "out" / "r1.run.tar.gz") == {"r1", "r1/run.json"}


def test_a_run_that_grows_as_it_is_copied_is_copied_and_the_wait_goes_on(machine: Machine) -> None:
    # 10 MB that does not compress, appended to every 5 ms: tar finds it changed as it read it
    run, tmp = machine
    grows = (
        A_RUN + ' && head -c 10000000 /dev/urandom > "$RUNS/r1/samples.jsonl"'
        ' && while :; do echo x >> "$RUNS/r1/samples.jsonl"; sleep 0.005; done'
    )
    assert run("background", grows).returncode == 0
    _until(tmp / "runs" / "r1" / "run.json")
    waited = run("wait", str(tmp / "out"), "7")  # copies at 2, 4 and 6 s, then at the end
    assert waited.returncode == 0, waited.stderr
    assert "go on" in waited.stdout
    assert _names(tmp / "out") == ["background.log", "r1.run.tar.gz"]
    assert _members(tmp / "out" / "r1.run.tar.gz") == {"r1", "r1/run.json", "r1/samples.jsonl"}


def test_a_run_the_steps_packed_comes_back_once(machine: Machine) -> None:
    # the steps pack their run (as `run.sh bench` does) once the wait has copied it
    run, tmp = machine
    out = tmp / "out"
    steps = (
        A_RUN + f' && until [ -f "{out}/r1.run.tar.gz" ]; do sleep 0.1; done'
        ' && tar -C "$RUNS" -czf "$BG/out/spec.run.tar.gz" r1'
    )
    assert run("background", steps).returncode == 0
    waited = run("wait", str(out), "30")
    assert "ended (exit 0)" in waited.stdout
    assert _names(out) == ["background.log", "spec.run.tar.gz"]
