#!/usr/bin/env bash
# Decisions per second at steady state through `lifesearch judge` itself (engine start-up reported apart),
# hf (the packed kernel) and vllm (prefix caching), smollm2-135m in float32 on this CPU, on the 10 longest
# DeepResearch Bench reports (claude-3-7-sonnet; longest by characters; each report fitted to the model's
# 8,192-token context as the judge fits it). Each engine judges in a fresh run directory; the summary line
# and the manifest's judge stats (wall_s, engine_start_s, steady_decisions_per_s) go to $OUT.
#   scripts/bench/judge_at_scale.sh [DRB_DIR]     (default ../shared/external/deep_research_bench)
# Needs vLLM's CPU environment (.venv-vllm, scripts/ci/vllm_cpu_env.sh) for the vllm side; takes tens of
# minutes on 2 cores. Run it on an idle machine for figures to quote.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
DRB=${1:-../shared/external/deep_research_bench}
OUT=${OUT:-/tmp/judge-at-scale}
PY=${PY:-.venv-vllm/bin/python}
THREADS=${THREADS:-2}
mkdir -p "$OUT"
export PYTHONPATH="$PWD" OMP_NUM_THREADS="$THREADS"
if [ ! -f "$OUT/drb/tasks.jsonl" ]; then
  "$PY" -m lifesearch_local import drb --queries "$DRB/query.jsonl" --criteria "$DRB/criteria.jsonl" \
    --reports "$DRB/reports-claude-3-7-sonnet.jsonl" --out "$OUT/drb" || exit 1
fi
"$PY" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
lines = open(f"{out}/drb/reports.jsonl").read().splitlines()
longest = sorted(lines, key=lambda x: len(json.loads(x)["text"]), reverse=True)[:10]
open(f"{out}/longest10.jsonl", "w").write("\n".join(longest) + "\n")
print("the 10 longest reports:", ", ".join(f"{json.loads(x)['task_id']} ({len(json.loads(x)['text']):,} chars)" for x in longest))
PY
cat >"$OUT/hf.yaml" <<EOF
judge: {id: smollm2-hf, mode: choice, model: {backend: hf, model: smollm2-135m, device: cpu, dtype: float32}}
EOF
cat >"$OUT/vllm.yaml" <<EOF
judge: {id: smollm2-vllm, mode: choice, model: {backend: vllm, model: smollm2-135m, dtype: float32, enforce_eager: true}}
EOF
rc=0
for engine in hf vllm; do
  rm -rf "$OUT/run-$engine"
  echo "load average before $engine: $(cat /proc/loadavg)" | tee -a "$OUT/summary.txt"
  echo "\$ lifesearch judge --config $OUT/$engine.yaml --tasks $OUT/drb/tasks.jsonl --reports $OUT/longest10.jsonl --out $OUT/run-$engine --quiet"
  "$PY" -m lifesearch_local judge --config "$OUT/$engine.yaml" --tasks "$OUT/drb/tasks.jsonl" \
    --reports "$OUT/longest10.jsonl" --out "$OUT/run-$engine" --quiet 2>"$OUT/$engine.stderr" | tee -a "$OUT/summary.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { rc=1; tail -5 "$OUT/$engine.stderr"; }
  echo "load average after $engine: $(cat /proc/loadavg)" | tee -a "$OUT/summary.txt"
  "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); print(json.dumps({k: v for k, v in m['stages'].items() if k.startswith('judge')}))" \
    "$OUT/run-$engine/manifest.json" | tee -a "$OUT/summary.txt"
done
exit "$rc"
