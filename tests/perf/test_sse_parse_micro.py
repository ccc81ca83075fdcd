"""bench/perf/sse_parse_micro.py in its quick mode, under the vLLM venv's python (it imports
`vllm bench serve`'s request function): each client's stream handling checked on the same
bytes on every test run, so the benchmark cannot rot."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support import vllm_env

SCRIPT = vllm_env.REPO / "bench" / "perf" / "sse_parse_micro.py"


@pytest.mark.integration
def test_quick_mode_times_both_clients_on_every_read_size() -> None:
    vllm_env.require()
    env = {**os.environ, "KBGEN_VLLM_MODELS": str(vllm_env.MODELS)}
    done = subprocess.run(
        [str(vllm_env.VENV / "bin" / "python"), str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    assert [row[0] for row in rows] == ["1", "16", "200"]
    assert all(float(value) > 0 for row in rows for value in row[1:])
