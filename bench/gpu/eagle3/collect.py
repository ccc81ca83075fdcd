#!/usr/bin/env python3
"""Collect the model's own outputs: greedy answers to the training prompts, as speculators rows.

Usage: python3 bench/gpu/eagle3/collect.py MODEL PROMPTS.jsonl OUT_DIR [--max-tokens 256]

vLLM's offline engine (`LLM.chat`) answers every prompt of PROMPTS.jsonl (bench/gpu/eagle3/
prompts.py) as the benchmark asks the server (chat template, temperature 0, EOS ignored), and
writes OUT_DIR/rows.jsonl, one `{"input_ids", "loss_mask"}` per answer (the loss on the answer's
tokens only: what `speculators prepare-data` takes without a render endpoint), and
OUT_DIR/collect.json: what was generated, how much, and how long it took.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("prompts", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    suite = [json.loads(line) for line in args.prompts.open()]

    t0 = time.monotonic()
    # after the arguments (a usage error costs no engine start); by name, as mypy would take
    # this repository's bench/vllm folder for the package
    vllm = importlib.import_module("vllm")

    llm = vllm.LLM(
        model=str(args.model),
        dtype="bfloat16",
        max_model_len=2048,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enable_prefix_caching=False,
        seed=0,
    )
    loaded = time.monotonic()
    params = vllm.SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    conversations = [[{"role": "user", "content": row["prompt"]}] for row in suite]
    outputs = llm.chat(conversations, params, use_tqdm=False)
    generated = time.monotonic()

    tokens: collections.Counter[str] = collections.Counter()
    with (args.out / "rows.jsonl").open("w") as rows:
        for row, output in zip(suite, outputs, strict=True):
            prompt_ids = list(output.prompt_token_ids or [])
            answer_ids = list(output.outputs[0].token_ids)
            rows.write(
                json.dumps(
                    {
                        "input_ids": prompt_ids + answer_ids,
                        "loss_mask": [0] * len(prompt_ids) + [1] * len(answer_ids),
                    }
                )
                + "\n"
            )
            tokens["prompt"] += len(prompt_ids)
            tokens["generated"] += len(answer_ids)
            tokens[f"generated:{row['class']}"] += len(answer_ids)
    stats = {
        "model": str(args.model),
        "vllm": vllm.__version__,
        "prompts": len(suite),
        "classes": dict(collections.Counter(r["class"] for r in suite)),
        "sampling": {"temperature": 0, "max_tokens": args.max_tokens, "ignore_eos": True},
        "prompt_tokens": tokens["prompt"],
        "generated_tokens": tokens["generated"],
        "generated_tokens_by_class": {
            k.split(":", 1)[1]: v for k, v in tokens.items() if k.startswith("generated:")
        },
        "engine_start_s": round(loaded - t0, 1),
        "generate_s": round(generated - loaded, 1),
        "generated_tok_s": round(tokens["generated"] / (generated - loaded), 1),
    }
    (args.out / "collect.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
