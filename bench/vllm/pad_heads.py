#!/usr/bin/env python3
"""The same Llama with an attention head count tensor parallelism can split: SmolLM2-135M's 9
query heads over 3 key/value heads divide over no 2 GPUs, vLLM refusing `--tensor-parallel-size 2`.

Usage (a Python with torch, safetensors and transformers, such as the vLLM venv's):
    python bench/vllm/pad_heads.py SRC_DIR OUT_DIR [--heads 12] [--check]

Each layer's key/value heads are repeated to one per query head (grouped-query attention
written out as multi-head: the same function), then query, key and value heads of zeros are
added up to `--heads`, with zero columns of the output projection: a head whose output
projection is zero adds nothing, so the model computes what it did (`--check`: the logits of
a prompt, both models in float32 on this machine's CPU, to 1e-4). 12, not 10: transformers
refuses a hidden size (576) that is no multiple of the head count, whatever `head_dim` says.
What changes is the work: 12 key/value heads where there were 3 (4 times the KV cache per
token and the attention reads) and 12 query heads for 9, so the padded model is slower than
the original on one GPU too: compare it with itself, one GPU against two. The tokenizer files
are copied; KBGEN_BUILD_OK is written last.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

MARKER = "KBGEN_BUILD_OK"


def pad(
    state: dict[str, torch.Tensor], config: dict[str, Any], heads: int
) -> dict[str, torch.Tensor]:
    """`state` with every layer's attention as `heads` query and key/value heads."""
    q_heads, kv_heads, dim = (
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["head_dim"],
    )
    if heads < q_heads or q_heads % kv_heads:
        raise SystemExit(f"pad_heads: cannot pad {q_heads} heads over {kv_heads} to {heads}")
    group = q_heads // kv_heads
    out = dict(state)
    for name, weight in state.items():
        head_rows = name.endswith(("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                   "self_attn.v_proj.weight"))  # fmt: skip
        if head_rows:
            per_head = weight.reshape(-1, dim, weight.shape[-1])  # [heads, dim, hidden]
            if not name.endswith("q_proj.weight"):  # a key/value head per query head
                per_head = per_head.repeat_interleave(group, dim=0)
            zeros = per_head.new_zeros(heads - q_heads, dim, weight.shape[-1])
            out[name] = torch.cat([per_head, zeros]).reshape(heads * dim, weight.shape[-1])
        elif name.endswith("self_attn.o_proj.weight"):
            zeros = weight.new_zeros(weight.shape[0], (heads - q_heads) * dim)
            out[name] = torch.cat([weight, zeros], dim=1)
        elif name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")):
            raise SystemExit(f"pad_heads: {name}: attention biases are not handled")
    return out


def check(source: Path, padded: Path) -> float:
    """The largest difference of the two models' logits on a prompt, in float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(source)("The capital of France is", return_tensors="pt")
    logits = []
    for folder in (source, padded):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        with torch.inference_mode():
            logits.append(model(**ids).logits)
    return float((logits[0] - logits[1]).abs().max().item())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--check", action="store_true", help="compare the logits (CPU)")
    args = parser.parse_args()
    config = json.loads((args.source / "config.json").read_text())
    config.setdefault("head_dim", config["hidden_size"] // config["num_attention_heads"])
    state = pad(load_file(str(args.source / "model.safetensors")), config, args.heads)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / MARKER).unlink(missing_ok=True)
    for item in args.source.iterdir():
        if item.is_file() and item.name not in ("model.safetensors", "config.json", MARKER):
            shutil.copy(item, args.out / item.name)
    config |= {"num_attention_heads": args.heads, "num_key_value_heads": args.heads}
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(state, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    if args.check:
        diff = check(args.source, args.out)
        print(f"pad_heads: largest logit difference {diff:.2e}")
        if diff > 1e-4:
            raise SystemExit("pad_heads: the padded model computes something else")
    (args.out / MARKER).write_text("ok\n")
    print(f"pad_heads: {args.heads} heads in {args.out}")


if __name__ == "__main__":
    main()
