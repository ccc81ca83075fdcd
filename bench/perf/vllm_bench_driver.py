#!/usr/bin/env python3
"""Run `vllm bench serve` several times in one vLLM-venv process (helper of client_overhead.py).

Run with the vLLM venv's python:

    VENV/bin/python bench/perf/vllm_bench_driver.py REPLY_FD

Why: importing `vllm bench serve` costs ≈ 18–20 s of CPU here (torch, transformers), which is
longer than all the measurements together. This driver pays it once: it applies the version
patch of the project's wrapper (`bench/vllm/vllm_cli.py`, loaded as a module, so exactly what
`VENV/bin/python bench/vllm/vllm_cli.py bench serve ...` runs), imports vLLM's CLI, then reads
one JSON command per line on stdin and answers one JSON line on file descriptor REPLY_FD (its
stdout/stderr are vLLM's chatter, which the caller logs):

- `{"op": "bench", "argv": ["bench", "serve", ...]}` → sets `sys.argv = ["vllm", *argv]` and
  calls vLLM's CLI `main()` — the same function the `vllm` command calls, so arguments are parsed
  and dispatched exactly as on the command line; answers `{"ok": true, "wall_s": …,
  "window_cpu_s": …}`. `window_cpu_s` is this process's CPU time inside the measured window of
  the run (first request start → + `duration`, read from the `--save-detailed` result file):
  a thread samples `time.process_time()` every 10 ms during the run (≈ 100 GIL hand-overs per
  second: a negligible perturbation) and the window's ends are interpolated. Sampling from
  inside avoids the gaps an outside sampler showed on a saturated machine.
- `{"op": "count_tokens", "tokenizer": DIR, "texts": [...]}` → token counts of each text with
  the tokenizer `vllm bench serve` loads (`vllm.tokenizers.get_tokenizer`, no special tokens),
  the way vllm bench counts output tokens when a server sends no usage.
- `{"op": "count_result_texts", "tokenizer": DIR, "path": RESULT_JSON}` → the same, for the
  `generated_texts` of a `--save-detailed` result.
"""

from __future__ import annotations

import bisect
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _load_wrapper() -> None:
    spec = importlib.util.spec_from_file_location(
        "kbgen_vllm_cli", REPO / "bench" / "vllm" / "vllm_cli.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # patches importlib.metadata.version; no CLI call


class _CpuSampler(threading.Thread):
    """(perf_counter, process_time) every `interval_s`, until stopped."""

    def __init__(self, interval_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while True:
            self.samples.append((time.perf_counter(), time.process_time()))
            if self.halt.wait(self.interval_s):
                self.samples.append((time.perf_counter(), time.process_time()))
                return

    def cpu_between(self, start: float, end: float) -> float:
        times = [t for t, _ in self.samples]

        def at(t: float) -> float:
            i = bisect.bisect_left(times, t)
            if i == 0 or i == len(times):
                raise ValueError(f"{t} outside the sampled interval {times[0]}–{times[-1]}")
            (t0, c0), (t1, c1) = self.samples[i - 1], self.samples[i]
            return c0 + (c1 - c0) * (t - t0) / (t1 - t0)

        return at(end) - at(start)


def _result_path(argv: list[str]) -> Path | None:
    def value(flag: str) -> str | None:
        return argv[argv.index(flag) + 1] if flag in argv else None

    folder, name = value("--result-dir"), value("--result-filename")
    return Path(folder) / name if folder and name else None


def main() -> None:
    reply_fd = int(sys.argv[1])
    reply = os.fdopen(reply_fd, "w", buffering=1)
    _load_wrapper()
    import vllm.benchmarks.serve  # noqa: F401  (the slow import, done before READY)
    from vllm.entrypoints.cli.main import main as vllm_main
    from vllm.tokenizers import get_tokenizer

    tokenizers: dict[str, object] = {}

    def count(tok_dir: str, texts: list[str]) -> list[int]:
        if tok_dir not in tokenizers:
            tokenizers[tok_dir] = get_tokenizer(tok_dir)
        tok = tokenizers[tok_dir]
        return [len(tok(t, add_special_tokens=False).input_ids) for t in texts]  # type: ignore[operator]

    reply.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        answer: dict[str, object]
        if not line.strip():
            continue
        cmd = json.loads(line)
        try:
            if cmd["op"] == "bench":
                sys.argv = ["vllm", *cmd["argv"]]
                start = time.perf_counter()
                cpu = time.process_time()
                sampler = _CpuSampler()
                sampler.start()
                try:
                    vllm_main()
                finally:
                    sampler.halt.set()
                    sampler.join()
                answer = {
                    "ok": True,
                    "wall_s": time.perf_counter() - start,
                    "cpu_s": time.process_time() - cpu,
                }
                path = _result_path(cmd["argv"])
                if path is not None and path.exists():
                    result = json.loads(path.read_text())
                    if result.get("start_times"):  # with --save-detailed
                        first = min(result["start_times"])
                        window = (first, first + result["duration"])
                        answer["window"] = window
                        answer["window_cpu_s"] = sampler.cpu_between(*window)
            elif cmd["op"] == "count_tokens":
                answer = {"ok": True, "counts": count(cmd["tokenizer"], cmd["texts"])}
            elif cmd["op"] == "count_result_texts":
                texts = json.loads(Path(cmd["path"]).read_text())["generated_texts"]
                answer = {"ok": True, "counts": count(cmd["tokenizer"], texts)}
            else:
                answer = {"ok": False, "error": f"unknown op {cmd['op']!r}"}
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
