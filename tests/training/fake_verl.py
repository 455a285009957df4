"""A stand-in for verl's interpreter (`train.verl.python`) that trains nothing: it appends its argv to
`argv.jsonl` beside itself and writes what verl 0.9.1 would leave behind.

- `-m verl.trainer.main_ppo OVERRIDES`: for every step, a `<step>.jsonl` rollout dump in the legacy trainer's
  format (`verl/trainer/ppo/ray_trainer.py`, `_write_generations`; with `FAKE_VERL_DUMP=v1` the v1 trainer's,
  with a random `uid` and no reward extras; with `FAKE_VERL_DUMP=unknown` the v1 format for a problem not in the
  data) and a console metrics line; then `global_step_<n>/actor/` and
  `latest_checkpointed_iteration.txt`. Each step takes `batch_size` problems in order; even rollouts answer right.
- `-m verl.model_merger merge --local_dir A --target_dir B`: a Hugging Face folder at B.
`FAKE_VERL_EXIT=<code>` makes the trainer fail after its first step. With `algorithm.filter_groups.enable=True`
the console line also reports `training/filter_groups/evicted_samples`: the step number of groups.
"""

import json
import os
import sys
import uuid
from pathlib import Path

import polars as pl


def main_ppo(overrides: dict[str, str]) -> None:
    data = pl.read_parquet(overrides["data.train_files"]).to_dicts()
    batch, n = int(overrides["data.train_batch_size"]), int(overrides["actor_rollout_ref.rollout.n"])
    steps = int(overrides["trainer.total_training_steps"])
    dumps, checkpoints = Path(overrides["trainer.rollout_data_dir"]), Path(overrides["trainer.default_local_dir"])
    dumps.mkdir(parents=True, exist_ok=True)
    for step in range(1, steps + 1):
        lines = []
        for row_number in range(batch):
            row = data[((step - 1) * batch + row_number) % len(data)]
            prompt = f"system\nYou are a helpful assistant.\nuser\n{row['prompt'][-1]['content']}\nassistant\n"
            group = str(uuid.uuid4())
            for rollout in range(n):
                right = rollout % 2 == 0
                answer = row["reward_model"]["ground_truth"] if right else "wrong"
                line = {"input": prompt, "output": f"So \\boxed{{{answer}}}.", "gts": row["reward_model"]["ground_truth"],
                        "score": float(right), "step": step}
                if os.environ.get("FAKE_VERL_DUMP") in ("v1", "unknown"):
                    line["uid"] = f"{group}_{rollout}_0"
                    if os.environ["FAKE_VERL_DUMP"] == "unknown":
                        line["input"] = "user\nWhat is 1+1?\nassistant\n"
                else:
                    line.update(acc=right, problem_id=row["extra_info"]["problem_id"])
                lines.append(line)
        (dumps / f"{step}.jsonl").write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
        evicted = (f" - training/filter_groups/evicted_samples:{step}"
                   if overrides.get("algorithm.filter_groups.enable") == "True" else "")
        print(f"(TaskRunner pid=1) step:{step} - actor/pg_loss:{step / 10}{evicted} - critic/score/mean:0.5",
              flush=True)
        if os.environ.get("FAKE_VERL_EXIT"):
            sys.exit(int(os.environ["FAKE_VERL_EXIT"]))
    actor = checkpoints / f"global_step_{steps}" / "actor"
    (actor / "huggingface").mkdir(parents=True, exist_ok=True)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"fsdp shard")
    (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(steps))


def merge(arguments: list[str]) -> None:
    local_dir = arguments[arguments.index("--local_dir") + 1]
    target = Path(arguments[arguments.index("--target_dir") + 1])
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps({"merged_from": local_dir}))
    (target / "model.safetensors").write_bytes(b"weights")


if __name__ == "__main__":
    with (Path(__file__).parent / "argv.jsonl").open("a") as log:
        log.write(json.dumps(sys.argv[1:]) + "\n")
    if sys.argv[1:3] == ["-m", "verl.trainer.main_ppo"]:
        main_ppo(dict(argument.split("=", 1) for argument in sys.argv[3:]))
    elif sys.argv[1:4] == ["-m", "verl.model_merger", "merge"]:
        merge(sys.argv[4:])
    else:
        sys.exit(f"fake verl: unexpected arguments {sys.argv[1:]}")
