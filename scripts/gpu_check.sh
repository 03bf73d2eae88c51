#!/usr/bin/env bash
# The CUDA-only checks in one go, for a machine with one NVIDIA GPU and no network (expected about 5 minutes
# on an H200 without vLLM, 8 with it; each step has its own timeout, so a hang costs that step only, and the
# timeouts bound the whole at 10 minutes without vLLM, 15 with it):
#  1. the packed kernel's CUDA form (two_stage, what `auto` picks on a GPU) against scoring each prompt
#     alone (tests/gpu: fp32 log-probs ≤ 1e-3, bf16 bounded by bf16's own error), and the vLLM smoke test
#     where vLLM is installed;
#  2. `bench judge` on an 8B-shaped random Llama in bf16, 8 reports × 20 rubrics (prefix 5000 + suffix 128),
#     all 8 reports in each scoring call (as `lifesearch judge` passes a batch of reports):
#     a. at the judge's default token budget, with the one-prompt-per-rubric baseline (the agreement:
#        max |Δ p_true| packed vs each prompt alone, both bf16);
#     b. with a budget that holds every rubric of a report in one batch (102560 = 20 × 5128 tokens);
#     c. vLLM with prefix caching on the same token ids (`--backend vllm`), only where vLLM imports: the
#        GPU machine this project borrows has torch and transformers but no vLLM and no network, so this
#        step prints why it is skipped unless a vLLM wheel (and its dependencies) travel in .whl/. Its
#        weights are vLLM's dummy ones, so it gives speed, not agreement.
#     Each prints decisions/s, the prefix pass's and the whole column's TFLOP/s, their fraction of the card's
#     bf16 peak (MFU; `--peak-tflops` or the table in lifesearch_local/bench/judge.py) and of the matmul
#     rate torch reaches on this card (measured by the bench first). Targets (what makes the packed kernel
#     worth its own code on a GPU): the prefix pass at least 0.5 of the bf16 peak; packed at least as fast
#     as vLLM per decision.
# Needs torch with CUDA and transformers; the project's pure-Python deps (pydantic, …) either installed or
# as wheels in .whl/ (installed here into /tmp/site, no index).
# Results go to $OUT (default /tmp/gpu-check): gpu.txt, pytest.log, kernel.jsonl, bench-*.json, summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
rc=0
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"

echo "== 1. the packed kernel vs each prompt alone (CUDA) =="
LIFESEARCH_GPU_RESULTS="$OUT/kernel.jsonl" timeout 240 python3 -m pytest -q -s -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1

bench() {  # name, timeout, then bench judge's options
  local name=$1 limit=$2; shift 2
  echo "\$ lifesearch bench judge ${shape[*]} $*"
  timeout "$limit" python3 -m lifesearch_local bench judge "${shape[@]}" "$@" --json >"$OUT/bench-$name.json"
  local status=$?
  [ "$status" -eq 0 ] || { echo "bench $name: exit $status (see the lines above)"; rc=1; }
}

echo "== 2. bench judge, 8B-shaped Llama, bf16, 8 reports × 20 rubrics in each scoring call =="
shape=(--model shape:llama-8b --device cuda --dtype bfloat16 --prefix-tokens 5000 --rubrics 20 --suffix-tokens 128
       --reports 8 --repeats 3)
bench default-budget 240 --baseline single
bench report-per-batch 120 --baseline none --token-budget 102560
if python3 -c "import vllm" 2>/dev/null; then
  bench vllm 300 --baseline none --backend vllm
else
  echo "vLLM is not installed here (this GPU machine has no vLLM and no network): the vLLM column is skipped;"
  echo "carry a vLLM wheel and its dependencies in .whl/ to run it"
fi

# one line per bench run: decisions/s, MFU of the prefix pass and of the whole column, the agreement
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import glob, json, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/bench-*.json")):
    try:
        r = json.load(open(f))
    except (OSError, ValueError):
        print(f, "no result"); continue
    line = (f"{f}: {r['packed_form']}, median {r['packed_s']} s (min {r['packed_s_min']}, max {r['packed_s_max']}), "
            f"{r['packed_decisions_per_s']} decisions/s; packed {r.get('packed_gflops', 0) / 1e3:.1f} TFLOP/s = "
            f"{r.get('packed_of_peak')} of bf16 peak {r.get('peak_tflops')} ({r.get('packed_of_matmul')} of the matmul "
            f"rate {r.get('matmul_gflops')} GFLOP/s); prefix pass {r.get('prefix_gflops', 0) / 1e3:.1f} TFLOP/s = "
            f"{r.get('prefix_of_peak')} of peak (target 0.5)")
    if "max_abs_diff" in r:
        line += f"; max |Δ p_true| vs each prompt alone {r['max_abs_diff']:.2e}, speedup {r['speedup']}×"
    if "vllm_s" in r:
        line += (f"; vLLM median {r['vllm_s']} s, {r['vllm_decisions_per_s']} decisions/s, packed/vLLM "
                 f"{r['speedup_vs_vllm']}× (target ≥ 1)")
    print(line)
PY
exit "$rc"
