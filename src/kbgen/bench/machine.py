"""How busy the machine was while a window measured: other processes' CPU, steal and load.

The only module that imports psutil. `LoadSampler` takes the machine's CPU times and those of
kbgen's own process tree when a window starts and again when it ends; the difference is a
`MachineLoad`, kept on the window in run.json and in the record's samples file. What counts as
"busy" is the analysis' decision, not this module's.
"""

from __future__ import annotations

import time

import psutil

from kbgen.run.counters import MachineLoad

# CPU time the machine spent working. guest and guest_nice are left out: Linux already counts
# them in user and nice. idle, iowait and steal are not work of this machine's processes.
_BUSY = ("user", "nice", "system", "irq", "softirq")
_NOT_TIME = ("guest", "guest_nice")


class LoadSampler:
    """Measures one window from its creation to `stop()`.

    "Other" CPU is all CPU time used on the machine minus that of kbgen's process tree: this
    process, its children and theirs (a server the `process` launcher started and its engine's
    workers), living or already reaped by a process of the tree. A server reached through the
    `external` or `command` launcher is not a child of kbgen, so its CPU counts as "other":
    on such a run the figure says how busy the machine was, the server included.
    """

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._machine = psutil.cpu_times()
        self._own = self._own_seconds()
        self._started = time.monotonic()

    def _own_seconds(self) -> float:
        """CPU seconds of kbgen's process tree so far, reaped children included."""
        total = 0.0
        for process in [self._me, *self._me.children(recursive=True)]:
            try:
                t = process.cpu_times()
            except psutil.Error:  # gone between listing and reading: its parent counts it
                continue
            total += t.user + t.system + t.children_user + t.children_system
        return total

    def stop(self) -> MachineLoad:
        """The window's figures, from the sampler's creation until now."""
        end = psutil.cpu_times()
        own = self._own_seconds() - self._own
        delta = {name: getattr(end, name) - getattr(self._machine, name) for name in end._fields}
        elapsed = sum(v for name, v in delta.items() if name not in _NOT_TIME)
        busy = sum(delta.get(name, 0.0) for name in _BUSY)
        count = psutil.cpu_count() or 1
        if elapsed <= 0:  # a window shorter than the kernel's tick: nothing measurable
            elapsed = max(time.monotonic() - self._started, 1e-9) * count
        # the machine's and the processes' counters tick apart: a figure a hair below 0 is 0
        other = min(max(busy - own, 0.0) / elapsed * 100, 100.0)
        steal = max(delta["steal"], 0.0) / elapsed * 100 if "steal" in delta else None
        return MachineLoad(
            other_cpu_percent=round(other, 2),
            steal_percent=None if steal is None else round(steal, 2),
            load_1m=psutil.getloadavg()[0],
            cpu_count=count,
        )
