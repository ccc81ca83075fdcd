#!/usr/bin/env python3
"""The trained draft as vLLM loads it: config.json and its weights, without what it shares.

Usage: python3 bench/gpu/eagle3/strip.py CHECKPOINT_DIR OUT_DIR

Copies `config.json` and `model.safetensors` of a speculators checkpoint (its
`checkpoint_best`), leaving out `embed_tokens.weight` (the target's own, which vLLM shares when
the draft has none) and `t2d` (which vLLM does not read): 76 → 20 MB for SmolLM2's draft. Prints
the weights' sha256 and writes it to OUT_DIR.json beside the folder (not in it: the folder is
the draft, as the benchmark's record names it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file


def main() -> None:
    source, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "config.json", out / "config.json")
    weights = load_file(str(source / "model.safetensors"))
    kept = {k: v for k, v in weights.items() if k not in ("embed_tokens.weight", "t2d")}
    save_file(kept, str(out / "model.safetensors"), metadata={"format": "pt"})
    digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    info = {
        "from": str(source),
        "tensors": len(kept),
        "parameters": sum(v.numel() for v in kept.values()),
        "bytes": (out / "model.safetensors").stat().st_size,
        "sha256": digest,
    }
    out.with_name(out.name + ".json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
