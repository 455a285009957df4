"""What `sws train` writes to run a job with verl, under `train/<kind>/`, and the commands that run it.

- `verl/train.parquet`: the job's problems in verl's dataset layout (`sws.training.verl_dataset`);
- `verl/reward.py`: verl's `reward.custom_reward_function.path`; it puts sws's source on `sys.path` (after verl's
  own packages) and defines `compute_score`, a `sws.training.verl_reward.VerlReward` naming the world's verifier
  class and the reward (`train.reward`);
- `verl/overrides.txt`: the Hydra overrides, one a line;
- `launch.sh`: the command and environment, so the same run can be submitted elsewhere (Slurm, a Ray cluster);
  extra arguments go to verl (`--cfg job` prints the composed config and exits).

verl writes `checkpoints/` (FSDP, `global_step_<n>/actor`), `rollout_data/<step>.jsonl` and, through sws,
`log.txt`. Every path in the overrides is absolute, so `launch.sh` runs from any directory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import sws
from sws.atomic_files import write_parquet, write_text
from sws.config import TrainConfig
from sws.errors import UserError
from sws.references import name_of
from sws.training import TrainJob, launch_script_path, online_filter_band, reward_name, write_launch_script
from sws.training.tracking import tracking_environment
from sws.training.verl_dataset import verl_table
from sws.world import get_world

ENTRY_POINT = "verl.trainer.main_ppo"
# Overrides sws derives from `train.*`; `train.verl.overrides` may not set them, so each setting has one place.
MANAGED_KEYS = {
    "algorithm.adv_estimator": "fixed (GRPO)",
    "data.train_files": "written by sws", "data.val_files": "written by sws",
    "data.train_batch_size": "train.batch_size",
    "data.max_prompt_length": "train.verl.max_prompt_length",
    "data.max_response_length": "train.max_completion_length",
    "actor_rollout_ref.model.path": "train.init_model",
    "actor_rollout_ref.actor.optim.lr": "train.learning_rate",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "train.verl.mini_batch_size",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "train.verl.micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "train.verl.micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "train.verl.micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.use_kl_loss": "train.verl.use_kl_loss",
    "actor_rollout_ref.actor.kl_loss_coef": "train.beta",
    "actor_rollout_ref.actor.entropy_coeff": "train.verl.entropy_coeff",
    "actor_rollout_ref.rollout.name": "fixed (vllm)",
    "actor_rollout_ref.rollout.n": "train.num_generations",
    "actor_rollout_ref.rollout.temperature": "train.temperature",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "train.verl.tensor_parallel_size",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "train.verl.gpu_memory_utilization",
    "reward.custom_reward_function.path": "written by sws", "reward.custom_reward_function.name": "written by sws",
    "trainer.use_v1": "fixed (the legacy trainer, which dumps the reward's problem_id; the v1 trainer for every "
                      "continuing arm with train.online_filter)",
    "algorithm.filter_groups.enable": "train.online_filter",
    "algorithm.filter_groups.metric": "train.online_filter (the reward's acc)",
    "trainer.n_gpus_per_node": "train.verl.n_gpus_per_node", "trainer.nnodes": "train.verl.nnodes",
    "trainer.total_training_steps": "train.<kind>_steps", "trainer.total_epochs": "derived from the steps",
    "trainer.save_freq": "train.save_steps",
    "trainer.default_local_dir": "written by sws", "trainer.rollout_data_dir": "written by sws",
    "trainer.resume_mode": "fixed (auto)",
    "trainer.val_before_train": "fixed (no validation)", "trainer.test_freq": "fixed (no validation)",
}


@dataclass(frozen=True)
class VerlLayout:
    """Where a verl job's files live under its `out_dir` (`<run>/train/<kind>`)."""

    out_dir: Path

    @property
    def data(self) -> Path:
        return self.out_dir / "verl" / "train.parquet"

    @property
    def reward_module(self) -> Path:
        return self.out_dir / "verl" / "reward.py"

    @property
    def overrides_file(self) -> Path:
        return self.out_dir / "verl" / "overrides.txt"

    @property
    def launch_script(self) -> Path:
        return launch_script_path(self.out_dir)

    @property
    def checkpoints(self) -> Path:
        return self.out_dir / "checkpoints"

    @property
    def dumps(self) -> Path:
        return self.out_dir / "rollout_data"

    @property
    def log(self) -> Path:
        return self.out_dir / "log.txt"


def verl_python(cfg: TrainConfig) -> Path:
    """`train.verl.python` as an absolute path (relative ones are from the working directory)."""
    return Path(cfg.verl.python).expanduser().absolute()


def require_verl_python(cfg: TrainConfig, config_file: Path) -> Path:
    python = verl_python(cfg)
    if not python.is_file():
        raise UserError(f"{config_file}: field 'train.verl.python': {python} not found; run `make install-verl`, "
                        "or point it at the Python of an environment with verl 0.9.1")
    return python


def write_launch(job: TrainJob, cfg: TrainConfig) -> list[str]:
    """Write the job's data, reward module, overrides and launch.sh; return the command launch.sh runs."""
    layout = VerlLayout(job.out_dir)
    overrides = verl_overrides(job, cfg, layout)
    command = launch_command(verl_python(cfg), overrides)
    reward_module = reward_module_source(verifier_name(job), reward_name(job, cfg, "verl's reward module"))
    write_parquet(verl_table(job.problems, job.world, "train"), layout.data)
    write_text(layout.reward_module, reward_module)
    write_text(layout.overrides_file, "".join(f"{override}\n" for override in overrides))
    write_launch_script(job.out_dir, (
        f"verl GRPO run '{job.name}' ({job.steps} steps), written by `sws train {job.name}`, which runs this file.\n"
        "Submit it as it is to run elsewhere; arguments are passed to verl (`--cfg job` prints the config)."
    ), command, tracking_environment(cfg.report_to, job.out_dir))
    return command


def verl_overrides(job: TrainJob, cfg: TrainConfig, layout: VerlLayout) -> list[str]:
    """verl's Hydra overrides for the job, then `train.verl.overrides` unchanged; UserError for a bad setup."""
    verl = cfg.verl
    n_problems = job.problems.height
    if n_problems < cfg.batch_size:
        raise UserError(f"{job.config_file}: field 'train.batch_size' is {cfg.batch_size}, more than the "
                        f"{n_problems} problems of the {job.name} run; lower it (verl drops incomplete batches)")
    if cfg.micro_batch_size is not None:
        raise UserError(f"{job.config_file}: field 'train.micro_batch_size' is TRL's; verl's micro-batch is "
                        "train.verl.micro_batch_size_per_gpu, so remove it")
    mini_batch = verl.mini_batch_size or cfg.batch_size
    if cfg.batch_size % mini_batch:
        raise UserError(f"{job.config_file}: field 'train.verl.mini_batch_size' is {mini_batch}, which does not "
                        f"divide train.batch_size {cfg.batch_size}; pick a divisor")
    passed = _check_passthrough(verl.overrides, job.config_file)
    absolute = {name: str(path.absolute()) for name, path in (
        ("data", layout.data), ("reward", layout.reward_module), ("checkpoints", layout.checkpoints),
        ("dumps", layout.dumps),
    )}
    settings: dict[str, object] = {
        "algorithm.adv_estimator": "grpo",
        "data.train_files": absolute["data"],
        "data.val_files": absolute["data"],
        "data.train_batch_size": cfg.batch_size,
        "data.max_prompt_length": verl.max_prompt_length,
        "data.max_response_length": cfg.max_completion_length,
        "actor_rollout_ref.model.path": str(job.init_model),
        "actor_rollout_ref.actor.optim.lr": cfg.learning_rate,
        "actor_rollout_ref.actor.ppo_mini_batch_size": mini_batch,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": verl.micro_batch_size_per_gpu,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": verl.micro_batch_size_per_gpu,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": verl.micro_batch_size_per_gpu,
        "actor_rollout_ref.actor.use_kl_loss": verl.use_kl_loss,
        "actor_rollout_ref.actor.kl_loss_coef": cfg.beta,
        "actor_rollout_ref.actor.entropy_coeff": verl.entropy_coeff,
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.n": cfg.num_generations,
        "actor_rollout_ref.rollout.temperature": cfg.temperature,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": verl.tensor_parallel_size,
        "actor_rollout_ref.rollout.gpu_memory_utilization": verl.gpu_memory_utilization,
        "reward.custom_reward_function.path": absolute["reward"],
        "reward.custom_reward_function.name": "compute_score",
        "trainer.use_v1": job.beside_filtered,
        "trainer.n_gpus_per_node": verl.n_gpus_per_node,
        "trainer.nnodes": verl.nnodes,
        "trainer.total_training_steps": job.steps,
        # verl stops at whichever comes first; enough passes over the data that the step count does.
        "trainer.total_epochs": math.ceil(job.steps / (n_problems // cfg.batch_size)),
        "trainer.save_freq": cfg.save_steps,
        "trainer.default_local_dir": absolute["checkpoints"],
        "trainer.rollout_data_dir": absolute["dumps"],
        "trainer.resume_mode": "auto",
        "trainer.logger": verl_loggers(cfg.report_to),
        "trainer.val_before_train": False,
        "trainer.test_freq": -1,
        "trainer.project_name": "sws",
        "trainer.experiment_name": f"{job.run_name}-{job.name}",
        "data.seed": job.seed,
    }
    band = online_filter_band(job, cfg)
    if band is not None:
        settings |= group_filter_settings(band, cfg.num_generations, job.config_file)
    # A key given in train.verl.overrides (trainer.logger, the one sws sets that they may) is theirs alone:
    # Hydra refuses a key given twice.
    return [f"{key}={value}" for key, value in settings.items() if key not in passed] + list(verl.overrides)


def verl_loggers(report_to: str) -> str:
    """verl's trainer.logger: the console, whose step lines sws reads, and the tracker `train.report_to` names."""
    return "[console]" if report_to == "none" else f"[console,{report_to}]"


def group_filter_settings(band: tuple[float, float], n: int, config_file: Path) -> dict[str, object]:
    """verl's DAPO group filter for the online filter `band`.

    verl 0.9.1's `algorithm.filter_groups` runs in its v1 trainer only: it evicts every group whose metric is the
    same for all n responses and draws new prompts until the batch is full. With a 0/1 accuracy that keeps exactly
    the groups with 1/n <= accuracy <= 1 - 1/n, so it serves any band that keeps and drops the same groups (the
    authors' [0.125, 0.875] with 8 rollouts). The v1 trainer's dumps carry no problem_id; `sws` matches each
    dumped prompt to its problem by text, and reads the dropped groups per step from verl's console log.
    """
    low, high = band
    if not (0 < low <= 1 / n and 1 - 1 / n <= high < 1):
        raise UserError(f"{config_file}: field 'train.online_filter' is {list(band)}, but verl 0.9.1's group filter "
                        f"(algorithm.filter_groups) keeps exactly the groups with 0 < accuracy < 1, with {n} rollouts "
                        f"the band [{1 / n:g}, {1 - 1 / n:g}]; use that band, or train.trainer: trl for another")
    return {"trainer.use_v1": True, "algorithm.filter_groups.enable": True, "algorithm.filter_groups.metric": "acc"}


def _check_passthrough(overrides: list[str], config_file: Path) -> set[str]:
    """The keys `train.verl.overrides` sets; UserError for an item that is no override or that sets a key sws
    manages. `config_file` is the run's copy of the pipeline file, so the message names the field to change."""
    where = f"{config_file}: field 'train.verl.overrides'"
    keys = set()
    for override in overrides:
        key, equals, value = override.partition("=")
        key = key.lstrip("+~")
        if not equals or not key:
            raise UserError(f"{where} has '{override}', which is not KEY=VALUE; write it as verl's Hydra override")
        if key in MANAGED_KEYS:
            source = MANAGED_KEYS[key]
            fix = (f"sws fixes it: {source.removeprefix('fixed (').removesuffix(')')}" if source.startswith("fixed")
                   else "sws writes it" if source == "written by sws" else f"set {source} instead")
            raise UserError(f"{where} sets '{key}'; remove it from the overrides ({fix})")
        if key == "trainer.logger" and "console" not in value:
            raise UserError(f"{where} sets trainer.logger to {value}, without console, whose step lines sws reads; "
                            f"add it, e.g. trainer.logger=[console,wandb]")
        keys.add(key)
    return keys


def verifier_name(job: TrainJob) -> str:
    """The import name of the class of the job's world's verifier, which verl's reward module builds."""
    verifier = get_world(job.world).verifier
    try:
        return name_of(type(verifier))
    except ValueError:
        raise UserError(f"world '{job.world}': its verifier's class {type(verifier).__qualname__} is not defined at "
                        "the top of a module, which verl's reward module needs to import it; move it there") from None


def reward_module_source(verifier: str, reward: str) -> str:
    """verl's reward module, grading with verifier class `verifier` and rewarding with function `reward` (both
    `module:name`)."""
    source = Path(sws.__file__).resolve().parent.parent
    return (
        '"""verl\'s reward function for this run, written by `sws train` (reward.custom_reward_function.path)."""\n'
        "\nimport sys\n\n"
        "# sws's source, after verl's own packages: verl's environment has sws's grading code but no sws install.\n"
        f"if {str(source)!r} not in sys.path:\n"
        f"    sys.path.append({str(source)!r})\n\n"
        "from sws.training.verl_reward import VerlReward  # noqa: E402\n\n"
        f"compute_score = VerlReward(verifier={verifier!r}, reward={reward!r})\n"
    )


def launch_command(python: Path, overrides: list[str]) -> list[str]:
    return [str(python), "-m", ENTRY_POINT, *overrides]


def merge_command(python: Path, actor_dir: Path, target_dir: Path) -> list[str]:
    """verl's conversion of an FSDP actor checkpoint into a Hugging Face model folder."""
    return [str(python), "-m", "verl.model_merger", "merge", "--backend", "fsdp",
            "--local_dir", str(actor_dir.absolute()), "--target_dir", str(target_dir.absolute())]


def checkpoint_step(checkpoints: Path) -> int:
    """The step of the latest complete checkpoint (verl writes `latest_checkpointed_iteration.txt` last); 0: none."""
    tracker = checkpoints / "latest_checkpointed_iteration.txt"
    text = tracker.read_text().strip() if tracker.is_file() else ""
    return int(text) if text.isdigit() else 0


def actor_checkpoint(checkpoints: Path, step: int) -> Path:
    return checkpoints / f"global_step_{step}" / "actor"
