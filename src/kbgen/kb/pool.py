"""Many files parsed at once: a pool of processes that end with the one that started them."""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import TypeVar

PARALLEL_FROM = 256  # files to parse before a second process pays for its start-up

R = TypeVar("R")


def map_paths(func: Callable[[Path], R], paths: list[Path]) -> Iterator[R]:
    workers = os.cpu_count() or 1
    if workers < 2 or len(paths) < PARALLEL_FROM:
        yield from map(func, paths)
        return
    # forkserver, not fork: forking a process that may hold threads is unsafe
    with ProcessPoolExecutor(
        workers,
        mp_context=get_context("forkserver"),
        initializer=_end_with,
        initargs=(os.getpid(),),
    ) as pool:
        yield from pool.map(func, paths, chunksize=max(16, len(paths) // (workers * 8)))


def _end_with(parent: int) -> None:
    """In each worker: end it when the process that started the pool ends, however it ends.

    A pool's workers wait for work on a pipe whose both ends they hold, so a parent killed
    with SIGKILL would leave them (and the forkserver, and the resource tracker, which live
    as long as a worker does) waiting for good. A daemon thread watches the parent and ends
    the worker the moment it is gone; the forkserver and the resource tracker then end by
    themselves, nobody holding their pipes open any more.
    """
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="end-with-parent").start()


WATCH_INTERVAL_S = 0.5  # how often a parent is looked at where it cannot be waited for


def _watch(parent: int) -> None:
    try:
        pidfd = os.pidfd_open(parent)  # Linux: readable once the process has ended
    except ProcessLookupError:
        os._exit(1)  # ended before this worker started
    except (AttributeError, OSError):  # no pidfd here: look from time to time
        while _alive(parent):
            time.sleep(WATCH_INTERVAL_S)
    else:
        waiting = select.poll()
        waiting.register(pidfd, select.POLLIN)
        waiting.poll()
    os._exit(1)  # no cleanup to do: the pages are written atomically


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:  # gone, or its number taken by someone else's process
        return False
    return True
