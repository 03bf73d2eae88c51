#!/usr/bin/env bash
# The CUDA-only checks, for a machine with one NVIDIA GPU and no network (about 6 minutes):
#  1. the packed kernel's CUDA form (two_stage) against scoring each prompt alone (tests/gpu:
#     fp32 log-probs ≤ 1e-3, bf16 bounded by bf16's own error), and the vLLM smoke test where vLLM is installed;
#  2. `bench judge` on an 8B-shaped random Llama in bf16: decisions/s and fraction of bf16 peak of the
#     two-stage form (the CUDA default), at the judge's default token budget and with every rubric of a
#     report in one batch; 3 timed runs each (min/median/max), one JSON object each.
# Needs torch with CUDA and transformers; the project's pure-Python deps (pydantic, …) either
# installed or as wheels in .whl/ (installed here into /tmp/site, no index).
# Results go to $OUT (default /tmp/gpu-check): pytest.log, kernel.jsonl, bench-*.json.
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
LIFESEARCH_GPU_RESULTS="$OUT/kernel.jsonl" timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1

echo "== 2. bench judge, 8B-shaped Llama, bf16: the judge's default token budget, then a report's rubrics in one batch =="
shape=(--model shape:llama-8b --device cuda --prefix-tokens 5000 --rubrics 20 --suffix-tokens 128 --reports 8
       --baseline none --repeats 3)
# 102560 = 20 rows × (5000 + 128): two_stage's batch holds every rubric of a report (each row a prefix copy).
for budget in default 102560; do
  extra=(); [ "$budget" = default ] || extra=(--token-budget "$budget")
  echo "\$ lifesearch bench judge ${shape[*]} --form two_stage ${extra[*]}"
  timeout 240 python3 -m lifesearch_local bench judge "${shape[@]}" --form two_stage "${extra[@]}" --json \
    | tee "$OUT/bench-two_stage-$budget.json"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done
# one line per run: the fraction of bf16 peak (target: at least 0.5 for this shape on an H200)
python3 - "$OUT" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/bench-*.json")):
    try:
        r = json.load(open(f))
    except (OSError, ValueError):
        print(f, "no result"); continue
    print(f"{f}: {r['packed_form']}, median {r['packed_s']} s (min {r['packed_s_min']}, max {r['packed_s_max']}), "
          f"{r.get('packed_tflops')} TFLOP/s = {r.get('fraction_of_peak')} of bf16 peak")
PY
exit "$rc"
