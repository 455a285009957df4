#!/usr/bin/env bash
# GPU smoke test of the verl trainer: two verl GRPO steps of the math-qwen2.5-1.5b-8gpu preset (smaller
# batches) on a handful of MATH problems, end to end through `sws train initial`, then checks that
# rollouts.parquet and train/initial/final (a merged Hugging Face folder) appear.
#
# NOT RUN on the machines sws is developed on: they have no GPU, and verl cannot train on CPU. It needs one
# node with at least GPUS GPUs (default 8), `make install` and `make install-verl`, and Qwen/Qwen2.5-1.5B
# reachable (downloaded, or HF_HUB_OFFLINE=0).
# Usage: bench/gpu/verl_smoke.sh [RUN_DIR]     (environment: GPUS=8)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:-runs/verl-smoke}
GPUS=${GPUS:-8}
SWS=.venv/bin/sws

rm -rf "$RUN"
mkdir -p "$RUN"
# 70 problems: the seven fixture problems, ten times each under distinct numbers and ids.
.venv/bin/python - "$RUN/seed.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open("tests/fixtures/math_problems.jsonl")]
with open(sys.argv[1], "w") as out:
    for copy in range(10):
        for row in rows:
            out.write(json.dumps({**row, "problem_id": f"{row['problem_id']}-{copy}",
                                  "problem": f"Problem {copy}. {row['problem']}"}) + "\n")
PY
$SWS prepare --run "$RUN" --input "$RUN/seed.jsonl" --id-field problem_id --problem-field problem \
    --answer-field answer --category-field category --config math-qwen2.5-1.5b-8gpu
# Smaller steps than the preset's, set on the run's saved config (config.yaml).
.venv/bin/python - "$RUN/config.yaml" "$GPUS" <<'PY'
import sys, yaml
path, gpus = sys.argv[1], int(sys.argv[2])
config = yaml.safe_load(open(path))
config["train"].update(batch_size=16, max_completion_length=1024, save_steps=2, initial_steps=2)
config["train"]["verl"].update(mini_batch_size=16, n_gpus_per_node=gpus)
yaml.safe_dump(config, open(path, "w"), sort_keys=False)
PY
$SWS train initial --run "$RUN"
test -s "$RUN/rollouts.parquet" || { echo "smoke: $RUN/rollouts.parquet missing" >&2; exit 1; }
test -f "$RUN/train/initial/final/config.json" || { echo "smoke: $RUN/train/initial/final missing" >&2; exit 1; }
.venv/bin/python -c "import polars as pl, sys; r = pl.read_parquet(sys.argv[1]); print(r); assert sorted(set(r['step'])) == [1, 2]" "$RUN/rollouts.parquet"
echo "smoke: ok ($RUN)"
