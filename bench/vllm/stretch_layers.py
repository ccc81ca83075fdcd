#!/usr/bin/env python3
"""The same Llama with decoder layers appended that add nothing: a slower target whose greedy
tokens are exactly the original's, so that the original is a draft that knows its tokens.

Usage (a Python with torch, safetensors and transformers, such as the vLLM venv's):
    python bench/vllm/stretch_layers.py SRC_DIR OUT_DIR [--append 120] [--check]

A decoder layer adds its attention's output projection and its MLP's down projection to the
residual stream; both of an appended layer are zeros, so the stream leaves it as it came in and
the model computes what it did, while each appended layer costs a real layer's work (dense
matrix products do not skip zeros). The appended layers' other weights (norms, query, key,
value, gate and up projections) are copies of the last original layer's: trained weights, fed
the residual stream that the last layer itself sees the like of, keep the discarded
activations finite in bf16, and an infinite one times a zero weight would be NaN in the stream.
config.json says `num_hidden_layers` (and lists per layer, such as `layer_types`, grow by the
last entry); a tied lm_head stays tied (`tie_word_embeddings`: the state has no `lm_head`, and
none is added). `--check`: both models in float32 (on CUDA when there is one, else on this
machine's CPU), the logits of two prompts to 1e-4 and 16 greedy tokens each, the same ids
(vLLM's bf16 kernels, batched, still differ now and then: 0.988 of draft tokens accepted on an
H100 on 2026-12-06). The tokenizer files are copied; KBGEN_BUILD_OK is written last.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

MARKER = "KBGEN_BUILD_OK"
LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
SILENT = ("self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.down_proj.weight",
          "mlp.down_proj.bias")  # fmt: skip
PROMPTS = ("The capital of France is", "def fibonacci(n):")


def stretch(state: dict[str, torch.Tensor], layers: int, append: int) -> dict[str, torch.Tensor]:
    """`state` with `append` layers after its `layers`, copies of the last with silent outputs."""
    if {int(m[1]) for m in map(LAYER.match, state) if m} != set(range(layers)):
        raise SystemExit(f"stretch_layers: the state's layers are not 0 … {layers - 1}")
    prefix = f"model.layers.{layers - 1}."
    last = {name.removeprefix(prefix): w for name, w in state.items() if name.startswith(prefix)}
    out = dict(state)
    for index in range(layers, layers + append):
        for part, weight in last.items():
            copy = torch.zeros_like(weight) if part.endswith(SILENT) else weight.clone()
            out[f"model.layers.{index}.{part}"] = copy
    return out


def stretched_config(config: dict[str, Any], append: int) -> dict[str, Any]:
    layers = config["num_hidden_layers"]
    out = dict(config, num_hidden_layers=layers + append)
    for key, value in config.items():  # per-layer lists (layer_types and the like)
        if isinstance(value, list) and len(value) == layers and value:
            out[key] = value + [value[-1]] * append
    return out


def check(source: Path, stretched: Path) -> tuple[float, list[bool]]:
    """The largest logit difference over PROMPTS, in float32, and whether each prompt's 16
    greedy tokens are the same ids in both models."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(source)
    inputs = [tokenizer(p, return_tensors="pt").to(device) for p in PROMPTS]
    logits, tokens = [], []
    for folder in (source, stretched):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device).eval()
        with torch.inference_mode():
            logits.append([model(**ids).logits for ids in inputs])
            tokens.append([
                model.generate(**ids, max_new_tokens=16, do_sample=False, min_new_tokens=16)
                for ids in inputs
            ])  # fmt: skip
        del model
    diff = max(float((a - b).abs().max()) for a, b in zip(*logits, strict=True))
    same = [bool(torch.equal(a, b)) for a, b in zip(*tokens, strict=True)]
    return diff, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--append", type=int, default=120)
    parser.add_argument("--check", action="store_true", help="compare logits and greedy tokens")
    args = parser.parse_args()
    config = json.loads((args.source / "config.json").read_text())
    layers = config["num_hidden_layers"]
    state = stretch(load_file(str(args.source / "model.safetensors")), layers, args.append)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / MARKER).unlink(missing_ok=True)
    for item in args.source.iterdir():
        if item.is_file() and item.name not in ("model.safetensors", "config.json", MARKER):
            shutil.copy(item, args.out / item.name)
    config = stretched_config(config, args.append)
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(state, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    params = sum(w.numel() for w in state.values())
    tied = "tied" if config.get("tie_word_embeddings") else "untied"
    print(f"stretch_layers: {layers} + {args.append} layers, {params / 1e6:.1f} M parameters "
          f"(lm_head {tied}) in {args.out}")  # fmt: skip
    if args.check:
        diff, same = check(args.source, args.out)
        print(f"stretch_layers: largest logit difference {diff:.2e} over {len(PROMPTS)} prompts; "
              f"16 greedy tokens the same: {same}")  # fmt: skip
        if diff > 1e-4 or not all(same):
            raise SystemExit("stretch_layers: the stretched model computes something else")
    (args.out / MARKER).write_text("ok\n")


if __name__ == "__main__":
    main()
