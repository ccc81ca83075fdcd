"""bench/gpu/run.sh's `background` and `wait`: what a wait brings back is the steps' own newest
run, and a wait stopped before its end (the machine's limit, the session's GPU time) still leaves
it in OUT_DIR. A second bench on one machine once came back as the first one's run.tar.gz (the
first job's file, left in /tmp/bg/out, stood in for it), and a wait killed at the session's end
brought back nothing."""

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


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    """run.sh with its background folder and run folders under tmp_path; stops what it started."""
    env = {
        **os.environ,
        "BG": str(tmp_path / "bg"),
        "RUNS": str(tmp_path / "runs"),
        "WAIT_EVERY": "5",
    }

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


def _ended(bg: Path) -> None:
    for _ in range(100):
        if (bg / "rc").exists():
            return
        time.sleep(0.1)
    raise AssertionError("the background steps did not end")


def test_a_second_job_brings_back_its_own_run(machine: Machine) -> None:
    run, tmp = machine
    bg = tmp / "bg"
    # the first job as `run.sh bench` ends: its run folder, and that run packed into /tmp/bg/out
    first = (
        'mkdir -p "$RUNS/r1" && echo 1 > "$RUNS/r1/run.json" && '
        'tar -C "$RUNS" -czf "$BG/out/spec.run.tar.gz" r1'
    )
    assert run("background", first).returncode == 0
    _ended(bg)
    assert run("wait", str(tmp / "out1"), "10").returncode == 0
    assert sorted(p.name for p in (tmp / "out1").iterdir()) == ["background.log", "spec.run.tar.gz"]
    # the second goes on past the wait
    second = 'sleep 1 && mkdir -p "$RUNS/r2" && echo 2 > "$RUNS/r2/run.json" && sleep 30'
    assert run("background", second).returncode == 0
    time.sleep(2)
    waited = run("wait", str(tmp / "out2"), "1")
    assert waited.returncode == 0, waited.stderr
    assert "go on" in waited.stdout
    assert sorted(p.name for p in (tmp / "out2").iterdir()) == ["background.log", "r2.run.tar.gz"]
    assert _members(tmp / "out2" / "r2.run.tar.gz") == {"r2", "r2/run.json"}


def test_a_wait_cut_short_leaves_what_it_had(machine: Machine) -> None:
    run, tmp = machine
    assert (
        run(
            "background", 'mkdir -p "$RUNS/r1" && echo 1 > "$RUNS/r1/run.json" && sleep 60'
        ).returncode
        == 0
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run("wait", str(tmp / "out"), "60", timeout=8)  # its first copy at 5 s
    assert sorted(p.name for p in (tmp / "out").iterdir()) == ["background.log", "r1.run.tar.gz"]
    assert _members(tmp / "out" / "r1.run.tar.gz") == {"r1", "r1/run.json"}


def test_a_run_the_steps_packed_comes_back_once(machine: Machine) -> None:
    run, tmp = machine
    steps = (
        'mkdir -p "$RUNS/r1" && echo 1 > "$RUNS/r1/run.json" && sleep 6 && '
        'tar -C "$RUNS" -czf "$BG/out/spec.run.tar.gz" r1'
    )
    assert run("background", steps).returncode == 0
    waited = run("wait", str(tmp / "out"), "30")  # a copy at 5 s, then the steps' own at the end
    assert "ended (exit 0)" in waited.stdout
    assert sorted(p.name for p in (tmp / "out").iterdir()) == ["background.log", "spec.run.tar.gz"]
