#!/usr/bin/env python3
"""Runs `vllm bench serve` many times in one vLLM-venv process (a helper of client_overhead.py).

    VENV/bin/python bench/perf/vllm_bench_driver.py REPLY_FD

Importing `vllm bench serve` costs ≈ 18–20 s of CPU here (torch, transformers), longer than all
the measurements together; this driver pays it once. It loads the project's wrapper
`bench/vllm/vllm_cli.py` as a module (its version patch: exactly what `VENV/bin/python
bench/vllm/vllm_cli.py bench serve ...` runs) and imports vLLM's CLI; then, for each line on stdin
(a JSON list, the argv after `vllm`), it sets `sys.argv` and calls vLLM's CLI `main()`, the
function the `vllm` command calls, and answers one JSON line on file descriptor REPLY_FD:
`{"ok": true, "window_cpu_s": ...}` or `{"ok": false, "error": ...}`. A line that is a JSON
object `{"request": BACKEND, "input": {...}}` instead sends one request through the reference's
own request function (`ASYNC_REQUEST_FUNCS[BACKEND]` with a `RequestFuncInput` of those fields,
in one event loop and one aiohttp session kept for the driver's life) and answers its
`RequestFuncOutput` as `{"ok": true, "output": {...}}` (agreement.py interleaves it with kbgen
request by request). `window_cpu_s` is this
process's CPU time inside the run's measured window (first request start → + `duration`, from
the `--save-detailed` result file), interpolated from `time.process_time()` samples a thread
takes every 10 ms (about 100 GIL hand-overs a second: a negligible perturbation; sampled from
inside because an outside sampler misses samples on a saturated machine). Its stdout and stderr
are vLLM's chatter, which the caller logs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy

REPO = Path(__file__).resolve().parents[2]


def _load_wrapper() -> None:
    spec = importlib.util.spec_from_file_location(
        "kbgen_vllm_cli", REPO / "bench" / "vllm" / "vllm_cli.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # patches importlib.metadata.version; no CLI call


def _bench(argv: list[str], vllm_main: object) -> dict[str, object]:
    samples: list[tuple[float, float]] = []
    halt = threading.Event()

    def sample() -> None:
        while True:
            samples.append((time.perf_counter(), time.process_time()))
            if halt.wait(0.01):
                samples.append((time.perf_counter(), time.process_time()))
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    sys.argv = ["vllm", *argv]
    try:
        vllm_main()  # type: ignore[operator]
    finally:
        halt.set()
        sampler.join()
    result_dir = Path(argv[argv.index("--result-dir") + 1])
    result = json.loads((result_dir / argv[argv.index("--result-filename") + 1]).read_text())
    start = min(result["start_times"])  # perf_counter stamps: the clock of `samples`
    times, cpu = zip(*samples, strict=True)
    before, after = numpy.interp([start, start + result["duration"]], times, cpu)
    return {"ok": True, "window_cpu_s": float(after - before)}


class _OneRequest:
    """One request through the reference's request function, in a loop and session kept open."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session: Any = None

    def __call__(self, command: dict[str, Any]) -> dict[str, Any]:
        import dataclasses

        import aiohttp
        from vllm.benchmarks.lib.endpoint_request_func import (
            ASYNC_REQUEST_FUNCS,
            RequestFuncInput,
        )

        async def send() -> Any:
            if self.session is None:  # as vllm bench serve makes it, inside the loop
                self.session = aiohttp.ClientSession(
                    trust_env=True,
                    timeout=aiohttp.ClientTimeout(total=6 * 60 * 60),
                    connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
                )
            func = ASYNC_REQUEST_FUNCS[command["request"]]
            return await func(RequestFuncInput(**command["input"]), self.session)

        output = self.loop.run_until_complete(send())
        return {"ok": True, "output": dataclasses.asdict(output)}


def main() -> None:
    reply = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    _load_wrapper()
    import vllm.benchmarks.serve  # noqa: F401  (the slow import, done before answering ready)
    from vllm.entrypoints.cli.main import main as vllm_main

    reply.write(json.dumps({"ok": True, "ready": True}) + "\n")
    one = _OneRequest()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            command = json.loads(line)
            answer = one(command) if isinstance(command, dict) else _bench(command, vllm_main)
        except BaseException as exc:  # SystemExit from argparse included
            answer = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-2000:],
            }
        sys.stdout.flush()
        sys.stderr.flush()
        reply.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
