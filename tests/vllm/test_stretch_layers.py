"""bench/vllm/stretch_layers.py: a Llama with silent layers appended computes what it did (the
tiny model with 4 layers more, in the vLLM venv's transformers), and its config says so."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import vllm_env

pytestmark = pytest.mark.integration  # the vLLM venv's transformers on the tiny model

SCRIPT = vllm_env.REPO / "bench" / "vllm" / "stretch_layers.py"


def test_appended_silent_layers_compute_what_the_model_did(tmp_path: Path) -> None:
    python = vllm_env.require()
    out = tmp_path / "stretched"
    done = subprocess.run(
        [str(python), str(SCRIPT), str(vllm_env.TINY), str(out), "--append", "4", "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "largest logit difference" in done.stdout and (out / "KBGEN_BUILD_OK").exists()
    before = json.loads((vllm_env.TINY / "config.json").read_text())["num_hidden_layers"]
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == before + 4
