"""The machine-load sampler, on the real machine (psutil): kbgen's own process tree is not
"other", a process outside it is."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from kbgen.bench.machine import LoadSampler
from kbgen.run.counters import MachineLoad

BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


Started = list[subprocess.Popen[bytes]]


def burner(how: str, ready: Path, started: Started, seconds: float = 4.0) -> int:
    """Start a process that burns one core for `seconds`; its pid once it runs.

    child: a child of this process; grandchild: a child of a child (as an engine's workers
    are); detached: a grandchild whose parent has exited, so it is no longer in this tree.
    """
    burn = f"open({str(ready)!r}, 'w').write('go')\n" + BURN.format(seconds=seconds)
    pid_file = ready.with_suffix(".pid")
    if how == "child":
        started.append(subprocess.Popen([sys.executable, "-c", burn]))
        pid = started[-1].pid
    else:
        spawn = (
            "import subprocess, sys\n"
            f"p = subprocess.Popen([sys.executable, '-c', {burn!r}])\n"
            f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
            + ("p.wait()\n" if how == "grandchild" else "")
        )
        middle = subprocess.Popen([sys.executable, "-c", spawn])
        started.append(middle)
        if how == "detached":
            middle.wait()  # its child is orphaned: no longer a descendant of this process
        while not pid_file.exists() or not pid_file.read_text():
            time.sleep(0.01)
        pid = int(pid_file.read_text())
    while not ready.exists():
        time.sleep(0.01)
    return pid


@pytest.fixture
def burners() -> Iterator[tuple[list[int], Started]]:
    pids: list[int] = []
    started: Started = []
    yield pids, started
    for pid in pids:  # only the processes this test started, by their id
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    for process in started:
        process.wait(timeout=10)


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def window(pid: int, seconds: float = 1.5) -> tuple[MachineLoad, float, float]:
    """A sampled window while `pid` burns: the load, the machine's busy % (psutil's own
    figure over the same time) and the share of all cores `pid` used, in %."""
    psutil.cpu_percent(interval=None)
    before = cpu_seconds(pid)
    start = time.monotonic()
    sampler = LoadSampler()
    time.sleep(seconds)
    load = sampler.stop()
    share = (cpu_seconds(pid) - before) / ((time.monotonic() - start) * (os.cpu_count() or 1)) * 100
    return load, psutil.cpu_percent(interval=None), share


@pytest.mark.parametrize("how", ["child", "grandchild"])
def test_a_process_of_kbgen_s_tree_is_not_other(
    how: str, tmp_path: Path, burners: tuple[list[int], Started]
) -> None:
    pids, started = burners
    pids.append(burner(how, tmp_path / "ready", started))
    load, busy, share = window(pids[-1])
    assert share > 10  # it did burn: a share of the machine a wrong sum could not hide
    assert load.other_cpu_percent <= max(busy - 0.8 * share, 0) + 2


def test_a_process_outside_kbgen_s_tree_is_other(
    tmp_path: Path, burners: tuple[list[int], Started]
) -> None:
    pids, started = burners
    pids.append(burner("detached", tmp_path / "ready", started))
    assert pids[-1] not in {p.pid for p in psutil.Process().children(recursive=True)}
    load, _busy, share = window(pids[-1])
    assert share > 10
    assert load.other_cpu_percent >= 0.8 * share - 2


def test_the_figures_are_in_range() -> None:
    sampler = LoadSampler()
    time.sleep(0.3)
    load = sampler.stop()
    assert 0 <= load.other_cpu_percent <= 100
    assert load.cpu_count == os.cpu_count()
    assert load.load_1m is not None and load.load_1m >= 0
    if hasattr(psutil.cpu_times(), "steal"):
        assert load.steal_percent is not None and 0 <= load.steal_percent <= 100
    else:
        assert load.steal_percent is None
