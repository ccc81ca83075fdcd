"""Where the real vLLM for integration tests lives (built by bench/vllm/setup.sh).

Defaults to the clone's git-ignored `.vllm/`; KBGEN_VLLM_VENV and KBGEN_VLLM_MODELS point
elsewhere (a developer's cache). A missing vLLM fails the integration tests — it never skips
them: CI must run them for real.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
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


def spec_text(
    python: Path, port: int, sweep: dict[str, list[Any]] | None = None, **workload: Any
) -> str:
    spec = {
        "schema_version": 1,
        "id": "tiny-ngram",
        "title": "n-gram vs baseline on the tiny model",
        "hypothesis": {
            "statement": "n-gram is faster",
            "primary_metric": "decode_tok_s",
            "direction": "increase",
            "minimum_effect": 0.05,
        },
        "server": {
            "launcher": "process",
            "command": [str(python), str(CLI), "serve"],
            "model": str(TINY),
            "args": [
                "--max-model-len",
                "2048",
                "--dtype",
                "bfloat16",
                "--enforce-eager",
                "--no-enable-prefix-caching",
            ],
            "port": port,
            "startup_timeout_s": 600,
        },
        "baseline": "baseline",
        "variants": {
            "baseline": {},
            "ngram": {
                "speculative_config": {
                    "method": "ngram",
                    "num_speculative_tokens": 5,
                    "prompt_lookup_max": 4,
                    "prompt_lookup_min": 2,
                }
            },
        },
        "workload": {
            "prompts": str(REPO / "bench" / "prompts" / "seed.jsonl"),
            "classes": ["coding", "math"],
            "per_class": 2,
            "max_tokens": 48,
            "repeats": 1,
            "warmup": 1,
            "concurrency": 1,
            "api": "completions",
            "rounds": 1,  # the real server's mechanics; a test of rounds asks for them
            **workload,
        },
        **({"sweep": sweep} if sweep else {}),
    }
    return yaml.safe_dump(spec, sort_keys=False)
