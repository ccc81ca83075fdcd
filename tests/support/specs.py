"""A small experiment spec for tests: two classes of three prompts, arms named as asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbgen.run.spec import ExperimentSpec


def small_spec(
    tmp_path: Path,
    spec_id: str = "rounds",
    arms: tuple[str, ...] = ("a", "b"),
    server: dict[str, Any] | None = None,
    variants: dict[str, Any] | None = None,
    **workload: Any,
) -> ExperimentSpec:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"class": c, "prompt": f"{c} {i}"}) + "\n"
            for c in ("coding", "math")
            for i in range(3)
        )
    )
    return ExperimentSpec.model_validate(
        {
            "schema_version": 1,
            "id": spec_id,
            "title": "a small experiment for tests",
            "hypothesis": {
                "statement": "s",
                "primary_metric": "decode_tok_s",
                "direction": "increase",
                "minimum_effect": 0.05,
            },
            "server": server or {"launcher": "external", "url": "http://127.0.0.1:1"},
            "baseline": arms[0],
            "variants": variants or {arm: {} for arm in arms},
            "workload": {
                "prompts": str(prompts),
                "classes": ["coding", "math"],
                "repeats": 1,
                "warmup": 1,
                "concurrency": 1,
                "rounds": 1,  # the driver's mechanics; a test of rounds asks for them
                **workload,
            },
        }
    )
