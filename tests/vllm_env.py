"""Where the real vLLM for integration tests lives (built by bench/vllm/setup.sh).

Defaults to the clone's git-ignored `.vllm/`; KBGEN_VLLM_VENV and KBGEN_VLLM_MODELS point
elsewhere (a developer's cache). A missing vLLM fails the integration tests — it never skips
them: CI must run them for real.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("KBGEN_VLLM_VENV", REPO / ".vllm" / "venv"))
MODELS = Path(os.environ.get("KBGEN_VLLM_MODELS", REPO / ".vllm" / "models"))
TINY = MODELS / "kbgen-tiny-llama"
CLI = REPO / "bench" / "vllm" / "vllm_cli.py"


def require() -> Path:
    """The vLLM venv's python; fails the test with the set-up command when it is missing."""
    python = VENV / "bin" / "python"
    if not python.exists() or not (TINY / "KBGEN_BUILD_OK").exists():
        pytest.fail(f"no real vLLM at {VENV} / {TINY}: run bench/vllm/setup.sh (make test does)")
    return python
