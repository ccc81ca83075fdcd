"""bench/perf/client_overhead.py in its quick mode: kbgen in one process and in two, and
`vllm bench serve`, on the fake source, every sample checked by the script; so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import vllm_env

SCRIPT = vllm_env.REPO / "bench" / "perf" / "client_overhead.py"


@pytest.mark.integration
def test_quick_mode_measures_every_client(tmp_path: Path) -> None:
    vllm_env.require()
    out = tmp_path / "runs.json"
    env = {**os.environ, "KBGEN_VLLM_VENV": str(vllm_env.VENV)}
    env["KBGEN_VLLM_MODELS"] = str(vllm_env.MODELS)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text())
    assert list(runs) == ["C=4 N=40 M=8", "C=64 N=40 M=128"]
    for config in runs.values():
        assert list(config) == ["kbgen x1", "kbgen x2", "vllm bench"]
        for client in config.values():
            assert len(client) == 1 and client[0]["rate"] > 0
            assert client[0]["source_cores"] >= 0 and client[0]["other_cores"] >= 0
    assert "vs vllm" in done.stdout and "kbgen x2" in done.stdout
