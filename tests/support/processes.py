"""Whether processes a test started are still there (an unreaped zombie is not)."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil


def running(pid: int) -> bool:
    """Whether `pid` is a live process: not gone, not a zombie."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def still_running(pids: Iterable[int], seconds: float = 5.0) -> list[int]:
    """Those of `pids` still running after up to `seconds` (a kill is delivered at once; the
    reaping may take a moment)."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while (alive := [p for p in pids if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive
