#!/usr/bin/env python3
"""Build a tiny random-weight Llama model that vLLM can serve, without any model hub.

Usage (with the vLLM venv's python):
    VENV/bin/python bench/vllm/make_tiny_model.py OUT_DIR

Writes into OUT_DIR:
  - config.json / generation_config.json / model.safetensors (bf16, ~3.4 M params, ~7 MB):
    LlamaForCausalLM, hidden 256, intermediate 512, 2 layers, 4 heads (head_dim 64), vocab 4096;
    weights drawn with a fixed seed, so every build is the same.
  - tokenizer.json / tokenizer_config.json / special_tokens_map.json: a byte-level BPE
    (4096 entries) trained with `tokenizers` on local text (/usr/share/common-licenses and a
    fixed list of standard-library .py files), special tokens <unk> <s> </s> <pad>,
    tokenizer_class PreTrainedTokenizerFast, and a chat template.
  - KBGEN_BUILD_OK: written last; its presence means the build completed.

The output is for structural tests only: the model emits loops of tokens, not language.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

MODEL_NAME = "kbgen-tiny-llama"
SEED = 1234
VOCAB_SIZE = 4096
MARKER = "KBGEN_BUILD_OK"

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]  # ids 0, 1, 2, 3

# A Zephyr-like template using only the special tokens the tokenizer has.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)

# Standard-library modules used as training text (present in every CPython 3.x).
STDLIB_FILES = [
    "argparse.py",
    "ast.py",
    "base64.py",
    "bisect.py",
    "calendar.py",
    "collections/__init__.py",
    "contextlib.py",
    "copy.py",
    "csv.py",
    "dataclasses.py",
    "datetime.py",
    "difflib.py",
    "enum.py",
    "fractions.py",
    "functools.py",
    "heapq.py",
    "inspect.py",
    "json/decoder.py",
    "json/encoder.py",
    "logging/__init__.py",
    "os.py",
    "pathlib.py",
    "pprint.py",
    "queue.py",
    "random.py",
    "shutil.py",
    "statistics.py",
    "string.py",
    "subprocess.py",
    "textwrap.py",
    "threading.py",
    "typing.py",
    "uuid.py",
    "zipfile.py",
]
LICENSE_DIR = Path("/usr/share/common-licenses")


def training_files() -> list[str]:
    files: list[Path] = []
    if LICENSE_DIR.is_dir():
        files += sorted(p for p in LICENSE_DIR.iterdir() if p.is_file() and not p.is_symlink())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files += [stdlib / name for name in STDLIB_FILES if (stdlib / name).is_file()]
    if not files:
        raise SystemExit("make_tiny_model: no local training text found")
    return [str(p) for p in files]


def build_tokenizer() -> Any:  # a tokenizers.Tokenizer (untyped)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(training_files(), trainer)
    bos_id = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)]
    )
    return tok


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1]).resolve()
    t0 = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).unlink(missing_ok=True)

    raw = build_tokenizer()
    if raw.get_vocab_size() > VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {raw.get_vocab_size()} entries > {VOCAB_SIZE}")
    ids = {t: raw.token_to_id(t) for t in SPECIAL_TOKENS}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=2048,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    # Make the class explicit (vLLM/transformers read it to pick the tokenizer).
    cfg_path = out / "tokenizer_config.json"
    tcfg = json.loads(cfg_path.read_text())
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    tcfg.setdefault("chat_template", CHAT_TEMPLATE)
    cfg_path.write_text(json.dumps(tcfg, indent=2, ensure_ascii=False) + "\n")

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
        torch_dtype="bfloat16",
    )
    config._name_or_path = MODEL_NAME
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.generation_config.bos_token_id = ids["<s>"]
    model.generation_config.eos_token_id = ids["</s>"]
    model.generation_config.pad_token_id = ids["<pad>"]
    model.save_pretrained(out, safe_serialization=True)

    n_params = sum(p.numel() for p in model.parameters())
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    info = {
        "model": MODEL_NAME,
        "builder": "make_tiny_model.py",
        "seed": SEED,
        "parameters": n_params,
        "vocab_size": VOCAB_SIZE,
        "tokenizer_entries": raw.get_vocab_size(),
        "bytes": size,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    (out / MARKER).write_text(json.dumps(info, indent=2) + "\n")  # written last
    print(
        f"make_tiny_model: {n_params:,} params, {size / 1e6:.1f} MB in {out} ({info['seconds']} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
