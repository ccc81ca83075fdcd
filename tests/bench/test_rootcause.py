"""Why a server failed: the first error of any of its processes, however far above the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbgen.bench import logline, rootcause

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm-logs"
CORE = "(EngineCore pid=2) ERROR 12-01 10:00:00 [core.py:1330] "  # a line of logger.exception

# (log, the cause named, the line it is on: far above the end)
CASES = [
    (  # real: on the H200, vLLM 0.26.0 started without VLLM_USE_FLASHINFER_SAMPLER=0
        "h200-0.26-flashinfer-failure.log",
        "EngineCore: ModuleNotFoundError: No module named 'flashinfer'",
        63,
    ),
    (
        "gpu-0.26-flashinfer-failure.log",
        "EngineCore: ModuleNotFoundError: No module named 'flashinfer'",
        28,
    ),
    (
        "cpu-0.32-kv-cache-failure.log",
        "Worker: ValueError: Available memory on node 0 (15.69/17.09 GiB) on kv cache allocation "
        "is less than requested memory for kv (100000.0 GiB). Decrease --kv-cache-memory-bytes, "
        "VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes.",
        56,
    ),
]


@pytest.mark.parametrize(("log", "cause", "at"), CASES)
def test_a_real_failure_is_named_by_its_root_cause(log: str, cause: str, at: int) -> None:
    lines = list(logline.lines((LOGS / log).read_bytes().decode()))
    assert len(lines) - at >= 40  # the cause is far above what a tail of the log shows
    assert cause.split(": ", 1)[1] in lines[at - 1].message
    # what the end says: the API server's own error, which only points up
    assert any("See root cause above" in line.message for line in lines[-5:])
    assert rootcause.cause(lines) == cause


def _cause(text: str) -> str | None:
    return rootcause.cause(logline.lines(text))


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("loading\nready\n", None),
        (  # an ERROR line alone is the cause; a later exception is not
            "(APIServer pid=1) ERROR 12-01 10:00:00 [serving.py:9] CUDA out of memory\n"
            'Traceback (most recent call last):\n  File "a.py", line 1\nRuntimeError: later\n',
            "APIServer: CUDA out of memory",
        ),
        ("ERROR:    [Errno 98] address already in use\n", "[Errno 98] address already in use"),
        (  # a chain: the first exception printed is the original
            "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            'Traceback (most recent call last):\n  File "b.py", line 2\nValueError: y\n',
            "KeyError: 'x'",
        ),
        (  # two processes at once: each traceback followed on its own
            f"{CORE}EngineCore failed to start.\n{CORE}Traceback (most recent call last):\n"
            "(APIServer pid=1) INFO 12-01 10:00:00 [api.py:1] waiting for the engine\n"
            f'{CORE}  File "x.py", line 3\n'
            "(APIServer pid=1) WARNING 12-01 10:00:00 [api.py:2] Slow start\n"
            f"{CORE}ImportError: libcuda.so.1\n",
            "EngineCore: ImportError: libcuda.so.1",
        ),
        (  # a traceback cut short: the ERROR record that announced it
            f"{CORE}EngineCore failed to start.\n{CORE}Traceback (most recent call last):\n"
            f'{CORE}  File "x.py", line 3\n',
            "EngineCore: EngineCore failed to start.",
        ),
        (  # multiprocessing names the process of an unprefixed traceback
            'Process EngineCore_DP0:\nTraceback (most recent call last):\n  File "p.py"\n'
            "OSError: [Errno 28] No space left on device\n",
            "EngineCore_DP0: OSError: [Errno 28] No space left on device",
        ),
    ],
)
def test_the_first_error_event(text: str, cause: str | None) -> None:
    assert _cause(text) == cause


def test_a_long_message_is_cut() -> None:
    found = _cause("ERROR:    " + "x" * 5000 + "\n")
    assert found is not None and len(found) == rootcause.MAX_CHARS and found.endswith("…")


def test_the_last_line_that_says_something() -> None:
    assert rootcause.last(logline.lines("$ serve\nloading 37%\n\n")) == "loading 37%"
    assert rootcause.last(logline.lines("$ serve\n")) is None
