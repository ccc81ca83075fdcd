#!/usr/bin/env bash
# On the GPU machine (Python 3.12, torch for CUDA; nothing to download from): receive the pieces
# carry.sh made, install vLLM and kbgen's missing dependencies, build the model, run kbgen bench.
#
#   bench/gpu/run.sh receive PIECE          append one transferred piece to /tmp/carry/carry.tar
#   bench/gpu/run.sh install                unpack, pip install into /tmp/site, convert the model
#   bench/gpu/run.sh padded                 SmolLM2 with 12 heads (bench/vllm/pad_heads.py): one
#                                           that divides over 2 GPUs (its 9 divide over none)
#   bench/gpu/run.sh stretched [LAYERS]     SmolLM2 with LAYERS (120) silent decoder layers
#                                           appended (bench/vllm/stretch_layers.py, checked on
#                                           the GPU in float32): the same tokens through 5 times
#                                           the layers, into /tmp/models/smollm2-135m-stretched
#   bench/gpu/run.sh bench SPEC OUT_DIR     kbgen bench SPEC; the run folder, what the machine
#                                           is (nvidia-smi, versions) and the spec's --estimate
#                                           from records/ packed into OUT_DIR
#   bench/gpu/run.sh resume OUT_DIR         kbgen bench --resume of the newest run folder (one
#                                           that BENCH_LIMIT_S stopped), packed into OUT_DIR
#   bench/gpu/run.sh agreement SPEC OUT_DIR bench/perf/agreement.py SPEC (kbgen and vllm bench
#                                           serve on each arm's server); its folder, log and what
#                                           the machine is packed into OUT_DIR
#   bench/gpu/run.sh draft OUT_DIR          the EAGLE-3 draft (bench/gpu/eagle3/): install what the
#                                           image lacks of speculators' wheels, collect the model's
#                                           own answers, their hidden states, train, strip into
#                                           /tmp/draft; the draft in 15 MB pieces and its stats and
#                                           logs (draft-step.tar.gz) into OUT_DIR
#   bench/gpu/run.sh draft-in DIR           a draft `run.sh draft` made on an earlier machine
#                                           (DIR: its config.json, model.safetensors and
#                                           draft.json) into /tmp/draft, its sha256 checked
#   bench/gpu/run.sh background 'STEPS'     the shell line STEPS (run.sh steps) in a session of its
#                                           own that outlives the command: no start lost to the
#                                           machine's 10-minute limit; its log in /tmp/bg/log
#                                           (BG=/tmp/bg), its files in /tmp/bg/out (emptied first)
#   bench/gpu/run.sh wait OUT_DIR SECONDS   until the background steps end or SECONDS pass
#                                           (looking every WAIT_TICK, 5 s), and into OUT_DIR at
#                                           the end and every WAIT_EVERY (60) s before it: their
#                                           log, the files they wrote to /tmp/bg/out since the
#                                           last wait, and a copy of the newest run folder so far
#                                           (RUNS=/tmp/runs), packed whole or not at all; STOP=1:
#                                           stop the bench first (as Ctrl-C does: samples kept)
#
# Everything lives under /tmp (SITE=/tmp/site, MODELS=/tmp/models); kbgen runs from this checkout
# (PYTHONPATH=<repo>/src:/tmp/site). Each step prints its time. BENCH_ARGS: more options of
# kbgen bench (--ray local: the spec's blocks over a one-machine Ray cluster).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CARRY=/tmp/carry SITE=/tmp/site MODELS=/tmp/models RUNS=${RUNS:-/tmp/runs} BG=${BG:-/tmp/bg}
export PYTHONPATH="$ROOT/src:$SITE" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PIP_DISABLE_PIP_VERSION_CHECK=1
t0=$(date +%s)
took() { echo "run.sh: $1 in $(( $(date +%s) - t0 )) s"; }
pack() {  # DIR NAME FILE: DIR/NAME into FILE (a gzipped tar), whole or not at all; files that
    # change as they are read (a run that goes on) are packed as they were (tar's exit 1)
    tar --warning=no-file-changed -C "$1" -czf "$3.part" "$2" || [ $? -eq 1 ] \
        || { rm -f "$3.part"; return 1; }
    mv "$3.part" "$3"
}
describe() {  # what the machine is, beside a run: PREFIX.nvidia-smi.csv, PREFIX.versions.txt
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$1.nvidia-smi.csv" || true
    python3 -c "import torch, vllm, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, vllm.__version__)" > "$1.versions.txt" || true
}

case "${1:-}" in
receive)
    mkdir -p "$CARRY" && cat "$2" >> "$CARRY/carry.tar"
    took "received $(basename "$2") ($(du -h "$CARRY/carry.tar" | cut -f1) so far)" ;;
install)
    tar -C "$CARRY" -xf "$CARRY/carry.tar"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
        "$CARRY"/wheels/*.whl
    python3 -c "import vllm, vllm.entrypoints.openai.api_server, ruamel.yaml, detect_secrets; print('vllm', vllm.__version__)"
    took "installed"
    python3 "$CARRY/model/convert_smollm2.py" "$MODELS/smollm2-135m-instruct" \
        --gguf "$CARRY/model/SmolLM2-135M-Instruct.Q4_1.gguf"
    took "model converted" ;;
padded)
    python3 "$ROOT/bench/vllm/pad_heads.py" "$MODELS/smollm2-135m-instruct" \
        "$MODELS/smollm2-135m-instruct-12h" --heads 12
    took "padded" ;;
stretched)
    python3 "$ROOT/bench/vllm/stretch_layers.py" "$MODELS/smollm2-135m-instruct" \
        "$MODELS/smollm2-135m-stretched" --append "${2:-120}" --check
    took "stretched" ;;
bench)
    spec="$2" out="$3" name="$(basename "$2" .yaml)"
    mkdir -p "$out" "$RUNS"
    describe "$out/$name"
    cd "$ROOT"
    python3 -m kbgen bench "$spec" --estimate --records records > "$out/$name.estimate.txt" || true
    # BENCH_LIMIT_S: stop (as Ctrl-C does: samples kept) before the machine's per-command limit;
    # `run.sh resume` then goes on where it stopped
    ${BENCH_LIMIT_S:+timeout --signal=INT --kill-after=60 "$BENCH_LIMIT_S"} \
        python3 -m kbgen bench "$spec" --runs "$RUNS" ${BENCH_ARGS:-} > /tmp/bench.out || status=$?
    run="$(tail -1 /tmp/bench.out)"  # the run folder; a failed run's is the newest one
    [ -d "$run" ] || run="$(ls -dt "$RUNS"/*/ | head -1)"
    pack "$(dirname "$run")" "$(basename "$run")" "$out/$name.run.tar.gz"
    took "bench $name (run folder $(basename "$run"), exit ${status:-0})"
    exit "${status:-0}" ;;
resume)
    out="$2" run="$(ls -dt "$RUNS"/*/ | head -1)" && run="${run%/}"
    cd "$ROOT"
    ${BENCH_LIMIT_S:+timeout --signal=INT --kill-after=60 "$BENCH_LIMIT_S"} \
        python3 -m kbgen bench --resume "$run" ${BENCH_ARGS:-} > /tmp/bench.out || status=$?
    mkdir -p "$out"
    pack "$(dirname "$run")" "$(basename "$run")" "$out/$(basename "$run").run.tar.gz"
    took "resumed $(basename "$run") (exit ${status:-0})"
    exit "${status:-0}" ;;
agreement)
    spec="$2" out="$3" name="$(basename "$2" .yaml)"
    mkdir -p "$out" /tmp/agreement
    describe "$out/$name"
    cd "$ROOT"
    python3 bench/perf/agreement.py "$spec" --vllm-python python3 ${AGREEMENT_ARGS:-} --out "/tmp/agreement/$name" \
        > "$out/$name.log" 2>&1 || status=$?
    tar -C /tmp/agreement -czf "$out/$name.tar.gz" "$name"
    tail -60 "$out/$name.log"
    took "agreement $name (exit ${status:-0})"
    exit "${status:-0}" ;;
draft)
    out="$2" prep=/tmp/eagle3/prep ckpt=/tmp/eagle3/ckpt model="$MODELS/smollm2-135m-instruct"
    mkdir -p "$out/draft-step" /tmp/eagle3
    # the stats and logs in one file, whatever happens (at most 8 files come back from the machine)
    trap 'tar -C "$out" -czf "$out/draft-step.tar.gz" draft-step && rm -r "$out/draft-step"' EXIT
    # speculators' wheels the image and /tmp/site lack (pandas, pyarrow … may be there already)
    for w in "$CARRY"/train-wheels/*.whl; do
        name="$(basename "$w" | cut -d- -f1)"
        python3 -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$name" 2>/dev/null \
            || echo "$w"
    done > /tmp/eagle3/missing.txt
    [ -s /tmp/eagle3/missing.txt ] && python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --target "$SITE" $(cat /tmp/eagle3/missing.txt)
    sed 's|.*/||' /tmp/eagle3/missing.txt > "$out/draft-step/installed-wheels.txt"
    python3 -c "import speculators, datasets, importlib.metadata as m; print('speculators', m.version('speculators'))"
    took "speculators installed"
    describe "$out/draft-step/machine"
    python3 "$HERE/eagle3/prompts.py" /tmp/eagle3/prompts.jsonl
    VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_USE_V2_MODEL_RUNNER=0 \
        python3 "$HERE/eagle3/collect.py" "$model" /tmp/eagle3/prompts.jsonl /tmp/eagle3 \
        > "$out/draft-step/collect.log" 2>&1 || { tail -40 "$out/draft-step/collect.log"; exit 1; }
    cp /tmp/eagle3/collect.json "$out/draft-step/"
    took "collected"
    python3 -m speculators prepare-data --model "$model" --data /tmp/eagle3/rows.jsonl \
        --output "$prep" --seq-length 2048 --no-skip-token-freq --seed 0 \
        > "$out/draft-step/prepare.log" 2>&1 || { tail -40 "$out/draft-step/prepare.log"; exit 1; }
    took "prepared"
    python3 "$HERE/eagle3/hidden_states.py" "$model" "$prep" > "$out/draft-step/hidden_states.log" 2>&1 \
        || { tail -40 "$out/draft-step/hidden_states.log"; exit 1; }
    cp "$prep/hidden_states.json" "$out/draft-step/"
    took "hidden states"
    # TRAIN_LIMIT_S: the epochs saved by then are what there is (a checkpoint per epoch);
    # --loss-implementation eager: the fused Triton loss fails under torch 2.11's dynamo
    # ("ListVariable(length=21) is already tracked for mutation", speculators 0.9.0)
    train() {  # train [NAME=VALUE…]: speculators.train in that environment, its log train.log
        env "$@" timeout --signal=INT --kill-after=30 "${TRAIN_LIMIT_S:-330}" \
            python3 -m speculators.train --verifier-name-or-path "$model" --data-path "$prep" \
            --hidden-states-path "$prep/hidden_states" --on-missing raise --save-path "$ckpt" \
            --no-resume-from-checkpoint --draft-vocab-size 8192 --epochs "${TRAIN_EPOCHS:-5}" \
            --lr 3e-4 --total-seq-len 8192 --num-workers 4 --log-freq 10 --seed 0 \
            --loss-implementation eager > "$out/draft-step/train.log" 2>&1
    }
    # compiled (TRAIN_COMPILE=0: without): 5 epochs took 205 s compiled on an H200 (108 s
    # compiling at the first step, 46 s at the first validation, all steps then 20 s) and
    # 248 s without on another (flex attention unfused: 33-53 s an epoch)
    if [ "${TRAIN_COMPILE:-1}" = 0 ]; then train TORCHDYNAMO_DISABLE=1 || status=$?
    else train || status=$?; fi
    took "trained (exit ${status:-0})"
    case "${status:-0}" in 0|124) ;; *) tail -40 "$out/draft-step/train.log"; exit "$status" ;; esac
    best="$ckpt/checkpoint_best"; [ -e "$best" ] || best="$(ls -d "$ckpt"/*/ | sort -V | tail -1)"
    python3 "$HERE/eagle3/strip.py" "$best" /tmp/draft
    cp /tmp/draft.json /tmp/draft/config.json "$out/draft-step/"
    for d in "$ckpt"/*/; do [ -f "$d/val_metrics.json" ] && cp "$d/val_metrics.json" "$out/draft-step/val_metrics.$(basename "$d").json" || true; done
    split -b 15M /tmp/draft/model.safetensors "$out/draft.safetensors.part-"
    took "draft in /tmp/draft" ;;
draft-in)
    mkdir -p /tmp/draft && cp "$2/config.json" "$2/model.safetensors" /tmp/draft/
    cp "$2/draft.json" /tmp/draft.json
    want="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["sha256"])' "$2/draft.json")"
    echo "$want  /tmp/draft/model.safetensors" | sha256sum -c -
    took "draft in /tmp/draft (sha256 $want)" ;;
background)
    # a fresh out folder: a wait brings back these steps' files and no earlier job's
    rm -rf "$BG" && mkdir -p "$BG/out"
    # a command's background job starts with SIGINT ignored (no job control), which kbgen's
    # children would inherit: reset it, so that STOP=1 stops the bench as Ctrl-C does
    python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid()
os.execvp("bash", ["bash", "-c", sys.argv[1] + "; echo $? > \"$0\"", sys.argv[2] + "/rc"])' "$2" "$BG" \
        > "$BG/log" 2>&1 < /dev/null &
    echo $! > "$BG/pid"
    took "started in the background (pid $!): $2" ;;
wait)
    out="$2" limit="$3"
    if [ "${STOP:-0}" = 1 ] && [ ! -f "$BG/rc" ]; then
        pid="$(pgrep -s "$(cat "$BG/pid")" -f 'kbgen bench' | head -1 || true)"
        [ -n "$pid" ] && kill -INT "$pid" && echo "run.sh: stopping kbgen bench (pid $pid)"
    fi
    mkdir -p "$out" && touch "$BG/waiting"  # what is written from now on comes back next time too
    # into OUT_DIR every WAIT_EVERY seconds as well as at the end: a command stopped at the
    # machine's limit (or the session's GPU time) still brings back what is under OUT_DIR
    bring() {
        cp "$BG/log" "$out/background.log"
        since=(); [ -f "$BG/waited" ] && since=(-newer "$BG/waited")
        find "$BG/out" -maxdepth 1 -type f ! -name '*.part' "${since[@]}" -exec cp {} "$out/" \;
        run="$(ls -dt "$RUNS"/*/ 2>/dev/null | head -1)" && run="${run%/}"
        [ -n "$run" ] || return 0
        copy="$out/$(basename "$run").run.tar.gz"
        # the newest run folder so far, unless the steps packed it since it last changed
        # (run.sh bench: SPEC.run.tar.gz)
        if [ -n "$(find "$BG/out" -maxdepth 1 -name '*.run.tar.gz' -newer "$run")" ]; then
            rm -f "$copy"
        else
            pack "$RUNS" "$(basename "$run")" "$copy"
        fi
    }
    end=$((SECONDS + limit)) next=$((SECONDS + ${WAIT_EVERY:-60}))
    while [ ! -f "$BG/rc" ] && ((SECONDS < end)); do
        if ((SECONDS >= next)); then
            bring || echo "run.sh: a copy into $out failed" >&2
            next=$((SECONDS + ${WAIT_EVERY:-60}))
        fi
        sleep "${WAIT_TICK:-5}"
    done
    bring
    mv "$BG/waiting" "$BG/waited"
    tail -25 "$BG/log"
    took "waited: the background steps $([ -f "$BG/rc" ] && echo "ended (exit $(cat "$BG/rc"))" || echo "go on")" ;;
*)
    sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 2 ;;
esac
