"""bench/vllm/pad_heads.py: a Llama given a head count that divides over more ranks computes what
it did (the tiny model's 4 heads padded to 8, in the vLLM venv's transformers)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import vllm_env

pytestmark = pytest.mark.integration  # the vLLM venv's transformers on the tiny model

SCRIPT = vllm_env.REPO / "bench" / "vllm" / "pad_heads.py"


def test_padded_heads_compute_what_the_model_did(tmp_path: Path) -> None:
    python = vllm_env.require()
    out = tmp_path / "padded"
    done = subprocess.run(
        [str(python), str(SCRIPT), str(vllm_env.TINY), str(out), "--heads", "8", "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "largest logit difference" in done.stdout and (out / "KBGEN_BUILD_OK").exists()
    config = json.loads((out / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (8, 8)
    assert config["head_dim"] == 64  # the heads' width kept, not hidden / heads


def test_a_count_it_cannot_pad_to_is_refused_and_writes_no_model(tmp_path: Path) -> None:
    python = vllm_env.require()
    out = tmp_path / "padded"
    done = subprocess.run(
        [str(python), str(SCRIPT), str(vllm_env.TINY), str(out), "--heads", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "cannot pad 4 heads over 4 to 3" in done.stderr
    assert not (out / "KBGEN_BUILD_OK").exists()
