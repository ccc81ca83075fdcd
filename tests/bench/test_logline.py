"""A server's log line taken apart: process, level, place, message; launches split."""

from __future__ import annotations

import pytest

from kbgen.bench import logline


@pytest.mark.parametrize(
    ("raw", "process", "pid", "level", "where", "message"),
    [
        (
            "(EngineCore pid=2190) INFO 12-01 13:02:27 [core.py:117] Initializing a V1 LLM engine",
            "EngineCore",
            "2190",
            "INFO",
            "core.py:117",
            "Initializing a V1 LLM engine",
        ),
        (  # a frame of a logged traceback keeps its indentation
            '(Worker pid=7) ERROR 12-01 14:57:50 [multiproc_executor.py:1063]   File "x.py"',
            "Worker",
            "7",
            "ERROR",
            "multiproc_executor.py:1063",
            '  File "x.py"',
        ),
        (
            "INFO:     Application startup complete.",
            "",
            "",
            "INFO",
            "",
            "Application startup complete.",
        ),
        (
            "ERROR:    [Errno 98] address already in use",
            "",
            "",
            "ERROR",
            "",
            "[Errno 98] address already in use",
        ),
        (
            "Traceback (most recent call last):",
            "",
            "",
            "",
            "",
            "Traceback (most recent call last):",
        ),
        (  # VLLM_LOGGING_COLOR=1
            "\x1b[36m(APIServer pid=1)\x1b[0m WARNING 12-01 10:49:12 [vllm.py:1605] Async",
            "APIServer",
            "1",
            "WARNING",
            "vllm.py:1605",
            "Async",
        ),
        (
            "(VllmWorker-0 pid=11168) printed by a worker",
            "VllmWorker-0",
            "11168",
            "",
            "",
            "printed by a worker",
        ),
        ("$ vllm serve m --port 8000", "", "", "", "", "$ vllm serve m --port 8000"),
    ],
)
def test_a_line_taken_apart(
    raw: str, process: str, pid: str, level: str, where: str, message: str
) -> None:
    line = logline.parse(1, raw)
    assert (line.process, line.pid, line.level, line.where, line.message) == (
        process,
        pid,
        level,
        where,
        message,
    )


def test_launches_start_at_each_command_line() -> None:
    text = "written before\n$ serve a\none\n$ serve a\ntwo\nthree\n"
    groups = logline.launches(logline.lines(text))
    assert [[line.message for line in group] for group in groups] == [
        ["written before"],
        ["$ serve a", "one"],
        ["$ serve a", "two", "three"],
    ]
    assert logline.launches(logline.lines("")) == []
