"""Supervised warm start of the tiny policy on a deliberately uneven mix of categories.

The mix decides what the policy is good at: addition, subtraction and multiplication get two thirds of the
data from the first step; remainders, precedence and multi-step the rest, and only from 20 % of training on,
which leaves them weak but learnable (easy problems mostly solved, medium ones rarely). Only easy and medium
problems are shown (easy first), so hard ones measure how far the skill carries. A share of the carrying
additions and borrowing subtractions (`misconception_rate`) is answered with a column misconception
(`sws.worlds.arith.misconceptions`), so the policy applies a wrong procedure part of the time.
The result is cached under `~/.cache/sws/policies/<hash of settings>/` (or `$SWS_CACHE/policies/...`) with a
completion marker, so the demo builds it once; a lock makes concurrent callers wait for one build.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from sws import ui
from sws.atomic_files import open_lock_file, write_text
from sws.manifests import float_environment
from sws.worlds.arith.expressions import parse
from sws.worlds.arith.families import expression_text, families_of, sample_problem
from sws.worlds.arith.misconceptions import misconceived_answer
from sws.worlds.arith.policy import architecture, build_policy
from sws.worlds.arith.prompt import policy_prompt
from sws.worlds.arith.settings import ArithSettings

RECIPE_VERSION = 3
MARKER = "BOOTSTRAP_COMPLETE.json"
# category -> (share of training examples, fraction of training after which it appears)
BOOTSTRAP_MIX: dict[str, tuple[float, float]] = {
    "addition": (0.22, 0.0),
    "subtraction": (0.22, 0.0),
    "multiplication": (0.22, 0.0),
    "remainders": (0.10, 0.2),
    "precedence": (0.12, 0.2),
    "multi_step": (0.12, 0.2),
}
# level -> fraction of training after which it appears; hard problems are never shown, only reached by skill
LEVEL_START = {"easy": 0.0, "medium": 0.15}
BATCH_SIZE = 32
# Measured at 1,200 steps: 2e-3 leaves even one-digit addition at 50-87 % and 4e-3 at 23 %; 7e-4 reaches
# 100 % on the strong categories' easy problems and 63-100 % on their medium ones.
LEARNING_RATE = 7e-4
WARMUP_STEPS = 50
DECAY_FRACTION = 0.25


def cache_root() -> Path:
    return Path(os.environ.get("SWS_CACHE", Path.home() / ".cache" / "sws")).expanduser()


def data_fingerprint(seed: int, misconception_rate: float) -> str:
    """A hash of sample training examples, so a change to the problem families invalidates cached policies."""
    rng = random.Random(seed)
    examples = [training_example(rng, progress / 100, misconception_rate) for progress in range(100) for _ in range(3)]
    return hashlib.sha256(json.dumps(examples).encode()).hexdigest()[:16]


def bootstrap_settings(steps: int, seed: int, misconception_rate: float) -> dict:
    return {
        "recipe": RECIPE_VERSION, "data": data_fingerprint(seed, misconception_rate), "steps": steps, "seed": seed,
        "misconception_rate": misconception_rate,
        # Weights trained under another float environment (other kernels, say) differ: not the same policy.
        "float_environment": float_environment(),
        "mix": BOOTSTRAP_MIX, "batch_size": BATCH_SIZE, "learning_rate": LEARNING_RATE,
        "warmup_steps": WARMUP_STEPS, "decay_fraction": DECAY_FRACTION, "level_start": LEVEL_START,
        "architecture": architecture(),
    }


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def is_complete(folder: Path, settings: dict) -> bool:
    marker = folder / MARKER
    if not marker.exists():
        return False
    try:
        return json.loads(marker.read_text()).get("settings_hash") == settings_hash(settings)
    except json.JSONDecodeError:
        return False


def training_example(rng: random.Random, progress: float = 1.0, misconception_rate: float = 0.0) -> tuple[str, str]:
    """One (prompt, completion) pair of the uneven mix, at a point `progress` in [0, 1] of training.

    Early on only easy problems of the strong categories appear; medium problems and the weak categories join
    later (LEVEL_START, BOOTSTRAP_MIX), so the weak ones get fewer examples over fewer steps. A problem that a
    column misconception applies to is answered with it with probability `misconception_rate`.
    """
    categories = [name for name, (_, start) in BOOTSTRAP_MIX.items() if progress >= start]
    category = rng.choices(categories, weights=[BOOTSTRAP_MIX[name][0] for name in categories])[0]
    level = rng.choice([level for level, start in LEVEL_START.items() if progress >= start])
    problem = sample_problem(rng.choice(families_of(category, level)), rng)
    answer = problem.answer
    if misconception_rate > 0:
        wrong = misconceived_answer(parse(expression_text(problem)))
        if wrong is not None and rng.random() < misconception_rate:
            answer = str(wrong)
    return policy_prompt(problem.problem)["prompt"], f"\\boxed{{{answer}}}"


def _batch(tokenizer, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded input ids, attention mask and labels that score only the completion and its EOS."""
    sequences, label_rows = [], []
    for prompt, completion in pairs:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        sequences.append(prompt_ids + completion_ids)
        label_rows.append([-100] * len(prompt_ids) + completion_ids)
    width = max(len(ids) for ids in sequences)
    ids = torch.full((len(pairs), width), tokenizer.pad_token_id)
    labels = torch.full((len(pairs), width), -100)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (sequence, label_row) in enumerate(zip(sequences, label_rows, strict=True)):
        ids[row, :len(sequence)] = torch.tensor(sequence)
        labels[row, :len(sequence)] = torch.tensor(label_row)
        mask[row, :len(sequence)] = 1
    return ids, mask, labels


def train_policy(folder: Path, steps: int, seed: int, misconception_rate: float) -> None:
    """Supervised training of the policy in `folder`, in place, on the uneven mix."""
    supervised_run(folder, steps, seed, lambda rng, progress: training_example(rng, progress, misconception_rate),
                   "bootstrap policy")


def supervised_run(folder: Path, steps: int, seed: int,
                   example: Callable[[random.Random, float], tuple[str, str]], label: str) -> None:
    """Supervised training of the model in `folder`, in place, on `example(rng, progress)` pairs: AdamW, one
    thread, completion tokens only."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01, betas=(0.9, 0.98))

    decay_start = int(steps * (1 - DECAY_FRACTION))

    def schedule(step: int) -> float:
        # warmup, constant, then a linear decay to zero: better than cosine for runs this short
        if step < WARMUP_STEPS:
            return (step + 1) / WARMUP_STEPS
        if step < decay_start:
            return 1.0
        return max(0.0, (steps - step) / max(1, steps - decay_start))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    rng = random.Random(seed)
    for step in ui.track(range(steps), label, total=steps):
        examples = [example(rng, step / steps) for _ in range(BATCH_SIZE)]
        ids, mask, labels = _batch(tokenizer, examples)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    model.eval()
    model.save_pretrained(folder)


def cached_folder(settings: dict, kind: str = "policies") -> Path:
    return cache_root() / kind / settings_hash(settings)


def built_folder(settings: dict, kind: str = "policies") -> Path | None:
    """The cached model of `kind` built with these settings, or None when it has not been built (never trains)."""
    folder = cached_folder(settings, kind)
    return folder if is_complete(folder, settings) else None


def cached_bootstrap_policy(steps: int, seed: int, misconception_rate: float) -> Path | None:
    return built_folder(bootstrap_settings(steps, seed, misconception_rate))


def bootstrap_policy(out_dir: Path | None = None, steps: int | None = None, seed: int = 0,
                     misconception_rate: float | None = None) -> Path:
    """The warm-started tiny policy folder: reused if already built with these settings, else trained.

    Without `out_dir` it lives in the cache, keyed by its settings; `steps` and `misconception_rate` default
    to ArithSettings's.
    """
    steps = ArithSettings().bootstrap_steps if steps is None else steps
    misconception_rate = ArithSettings().misconception_rate if misconception_rate is None else misconception_rate
    settings = bootstrap_settings(steps, seed, misconception_rate)
    target = Path(out_dir) if out_dir is not None else cached_folder(settings)

    def build(folder: Path) -> None:
        build_policy(folder, seed=seed)
        train_policy(folder, steps, seed, misconception_rate)

    return cached_build(target, settings, build)


def cached_build(target: Path, settings: dict, build: Callable[[Path], None]) -> Path:
    """`target`, built by `build(folder)` unless it is already complete with these settings."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # Concurrent callers (parallel test sessions, two demos) wait for one build instead of training twice.
    lock = open_lock_file(target.parent / f".{target.name}.lock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(target, settings):
            ui.info(f"bootstrap: reusing {target}")
            return target
        building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            build(building)
            marker = {"settings_hash": settings_hash(settings), **settings}
            write_text(building / MARKER, json.dumps(marker) + "\n")
            if target.exists():
                shutil.rmtree(target)
            os.replace(building, target)
        finally:
            if building.exists():
                shutil.rmtree(building)
    finally:
        os.close(lock)
    return target
