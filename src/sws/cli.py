"""The `sws` command line: one typer app; each command parses options, resolves the config, calls a stage."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from sws import preflight, tokens, ui
from sws.config import PipelineConfig, load_run_config, role_config, save_run_config
from sws.errors import UserError
from sws.presets import pipeline_file, preset_names
from sws.run_dir import RunDir
from sws.run_lock import run_lock
from sws.secrets import redact
from sws.stage import Stage, all_stages, get_stage
from sws.world import all_worlds, get_world

# A run stopped at a spending cap (synthesize.max_tokens, synthesize.max_cost): not an error, but not done either,
# so a script does not go on to the next command.
CAPPED_EXIT = 3

class HelpIsAFlag:
    """typer's own --help shown as the flag it is, without a `<bool>` value (as `flag` shows sws's flags)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class Command(HelpIsAFlag, TyperCommand):
    pass


class Group(HelpIsAFlag, TyperGroup):
    pass


class PipelineOrder(Group):
    """`sws --help` lists `run`, then each stage's command in the method's order, then the tools."""

    def list_commands(self, ctx: Any) -> list[str]:
        stage_commands = [stage.command_name for stage in all_stages()]
        order = list(dict.fromkeys(["run", *stage_commands]))
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: order.index(name) if name in order else len(order))


app = typer.Typer(
    cls=PipelineOrder,
    help="sws: turn a preliminary RL run's failures into verified synthetic problems and an augmented RL run.\n\n"
    "Example: sws run demo --run runs/demo",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn what a user can cause into one line on stderr: UserError and OSError exit 2; Ctrl-C exits 130.

    typer >= 0.29 vendors its own click, so a `click.ClickException` subclass would escape as a traceback;
    `typer.Exit` is what typer's runner turns into an exit code. Writes are atomic and stages commit their
    outputs as a set, so an interrupted command leaves every finished artifact as it was.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            print(f"error: {one_line(str(exc))}", file=sys.stderr)
            raise typer.Exit(2) from None
        except OSError as exc:
            print(f"error: {one_line(os_error_line(exc))}", file=sys.stderr)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:  # the entry point (sws.__main__) writes the line for every exit 130
            raise typer.Exit(130) from None
        except tokens.CapReached as stop:
            setting = stop.setting.split(" ")[0]
            flag = next((option.flags for stage in all_stages() for option in stage.options if option.field == setting),
                        "--" + setting.rsplit(".", 1)[-1].replace("_", "-"))
            print(f"stopped: {stop}; what is done is kept (finished shards, a partial manifest); rerun the same "
                  f"command with a higher {setting} ({flag}) to continue", file=sys.stderr)
            raise typer.Exit(CAPPED_EXIT) from None

    return wrapper


# Characters str.splitlines() breaks at: a value quoted from a user's file must not split the error line.
LINE_BREAKS = str.maketrans({char: repr(char)[1:-1] for char in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(message: str) -> str:
    """`message` as one printed line: line breaks shown escaped, known secrets redacted."""
    return redact(message).translate(LINE_BREAKS)


def os_error_line(exc: OSError) -> str:
    """`<path>: <reason>` for an error the operating system raised (read-only or full disk, not a folder, ...)."""
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


def command(
    name: str | None = None, *, group: typer.Typer | None = None, **kwargs: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a guarded command on `app`, or on a sub-app (`group`, e.g. `world_app`)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        (group or app).command(name, cls=Command, **kwargs)(guarded(fn))
        return fn

    return register


def with_default(help: str, field: str, named: str | None = None) -> str:
    """`help` and where the option's default comes from: the run's config (a preset or --config sets it), else
    sws's built-in value. Every option that sets a config field says it this way (`\\[` keeps rich markup out);
    `named`: how to name a field that depends on an argument (its built-in value is `field`'s)."""
    value: Any = built_in_config()
    for part in field.split("."):
        value = getattr(value, part)
    if isinstance(value, (tuple, list)):
        value = " ".join(f"{item:g}" if isinstance(item, float) else str(item) for item in value)
    built_in = "" if value is None else f"; built-in {value}"
    return f"{help} \\[default: the run's config ({named or field}){built_in}]"


def config_option(field: str, *names: str, help: str, **settings: Any) -> Any:
    """An option that sets config field `field`, its help saying where its default comes from."""
    return typer.Option(*names, help=with_default(help, field), **settings)


@functools.cache
def built_in_config() -> PipelineConfig:
    return PipelineConfig()


def flag(*names: str, **settings: Any) -> Any:
    """An option that takes no value, shown in --help without a `<bool>` value."""
    return typer.Option(*names, metavar="", **settings)


RunOpt = Annotated[Path, typer.Option("--run", help="Run directory holding the artifacts.")]
PipelineOpt = Annotated[
    Path | None, typer.Option("--config", help="Pipeline YAML or a shipped preset's name; unset: the run's "
                              "config.yaml, else the built-in defaults.")
]
ForceOpt = Annotated[bool, flag("--force", help="Rerun even if the stage's manifest is current.")]
ExecutorOpt = Annotated[
    str | None, config_option("executor.kind", "--executor", help="Where model calls and grading run: local or ray.")
]


def option_parameters(stage: Stage) -> list[inspect.Parameter]:
    """A command's parameters for the stage's declared options (each sets one config field)."""
    return [inspect.Parameter(option.field.replace(".", "_"), inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=Annotated[option.type | None, (flag if option.type is bool else typer.Option)(
                                  option.flags, help=with_default(option.help, option.field))])
            for option in stage.options]


def option_overrides(stage: Stage, values: dict[str, Any]) -> dict[str, Any]:
    """The config overrides the stage's declared options were given."""
    return {option.field: values[option.field.replace(".", "_")] for option in stage.options}


def check_run_dir(run: Path, starts_run: bool = True) -> None:
    """A command that starts a run (prepare, ingest, run) takes a new or existing folder; every other command
    reads a run, so a folder that is not there is a mistyped --run, and nothing is created for it."""
    if run.exists() and not run.is_dir():
        raise UserError(f"{run}: not a directory; --run takes a run directory (new or existing)")
    if not starts_run and not run.exists():
        raise UserError(f"{run}: no such run directory; check --run, or start the run with `sws prepare --run {run}` "
                        f"or `sws run PIPELINE --run {run}`")


def run_command(
    run: Path, pipeline: Path | None, overrides: dict[str, Any], action: Callable[[PipelineConfig], Any],
    command: str = "", stages: Iterable[Stage] = (), save: bool = True, starts_run: bool = False,
) -> PipelineConfig:
    """Hold the run's lock, resolve the config, check what needs no model, run `action`, then save the config.

    `config.yaml` records what the last successful command ran with, so a failing one leaves it unchanged
    (and `save=False` for one that runs no stage, such as a dry run). Only a command that `starts_run` may name a
    folder that is not there yet.
    """
    check_run_dir(run, starts_run)
    with run_lock(run):
        cfg = load_run_config(run, pipeline, overrides)
        source = pipeline or (RunDir(run).config if RunDir(run).config.exists() else "command-line options")
        preflight.check(cfg, command, source, stages)
        try:
            action(cfg)
        except tokens.CapReached:
            save_run_config(run, cfg)  # the steps done ran with it, and the rerun with a higher cap continues them
            raise
        if save:
            save_run_config(run, cfg)
    return cfg


def print_version(asked: bool) -> None:
    if asked:
        from sws import __version__

        print(f"sws {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    quiet: Annotated[bool, flag("--quiet", "-q", help="No progress bars or messages.")] = False,
    verbose: Annotated[bool, flag("--verbose", "-v", help="Also each request batch's use of the "
                                          "request cache.")] = False,
    version: Annotated[bool, flag("--version", callback=print_version, is_eager=True,
                                          help="Print sws's version and exit.")] = False,
):
    ui.set_verbosity(quiet, verbose)


@command(epilog="Example: sws prepare --input data/math_train.json --run runs/math")
def prepare(
    run: RunOpt,
    input: Annotated[
        Path | None, config_option("prepare.input", "--input", help="Seed set: JSON list, JSONL or Parquet; "
                                   "unset: the --preset's shipped file.")
    ] = None,
    preset: Annotated[
        str | None,
        config_option("prepare.preset", help="Field layout of a known file: math, math500, aime24, aime25, "
                      "gsm8k; unset: guessed from the file name."),
    ] = None,
    problem_field: Annotated[str | None, config_option("prepare.problem_field", help="Field holding the problem text.")] = None,
    answer_field: Annotated[str | None, config_option("prepare.answer_field", help="Field holding the reference answer.")] = None,
    category_field: Annotated[str | None, config_option("prepare.category_field", help="Field holding the category.")] = None,
    id_field: Annotated[str | None, config_option("prepare.id_field", help="Field holding a stable id (else a content hash).")] = None,
    categories: Annotated[
        str | None, config_option("prepare.categories",
                                  help="Comma-separated list of allowed categories (others are rejected).")
    ] = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Normalise a seed problem set into problems.parquet (duplicates and unanswered rows rejected with a reason)."""
    chosen_silently = config is None and not RunDir(run).config.exists()

    def prepare_with(cfg: PipelineConfig) -> None:
        run_one(get_stage("prepare"), cfg, run, force=force)
        if chosen_silently:  # after the stage, so that an error stays one line
            ui.info(defaults_chosen(cfg))

    run_command(run, config, {
        "prepare.input": str(input) if input else None, "prepare.preset": preset,
        "prepare.problem_field": problem_field, "prepare.answer_field": answer_field,
        "prepare.category_field": category_field, "prepare.id_field": id_field,
        "prepare.categories": [name.strip() for name in categories.split(",")] if categories else None,
    }, prepare_with, "prepare", starts_run=True)


def defaults_chosen(cfg: PipelineConfig) -> str:
    """The line `sws prepare` prints when neither --config nor the run's config.yaml chose the world and roles."""
    roles = [("extractor", cfg.roles.extractor), ("generator", cfg.roles.generator), ("labeler", cfg.roles.labeler),
             *((f"judge {i + 1}", judge) for i, judge in enumerate(cfg.roles.judges or [])), ("policy", cfg.roles.policy)]
    by_engine: dict[str, list[str]] = {}
    for name, role in roles:
        if role is not None:
            by_engine.setdefault(role.engine + (f"/{role.model}" if role.model else ""), []).append(name)
    chosen = "; ".join(f"{', '.join(names)}: {engine}" for engine, names in by_engine.items())
    return (f"prepare: no --config, so the built-in defaults: world '{cfg.world}'; {chosen} "
            "(--config FILE or a preset's name chooses)")


@command(epilog="Example: sws ingest --run runs/math --verl-dumps outputs/rollout_data --seed-file train.parquet")
def ingest(
    run: RunOpt,
    verl_dumps: Annotated[
        Path | None, typer.Option(help="verl trainer.rollout_data_dir: one <step>.jsonl per training step.")
    ] = None,
    acc_records: Annotated[
        Path | None, typer.Option(help="SwS trainer's acc_records.json: {\"train\": {\"<index>\": list of accuracies}}.")
    ] = None,
    seed_file: Annotated[
        Path | None,
        config_option("ingest.seed_file", help="File the trainer read (JSON/JSONL/Parquet); its row order or "
                      "`index` column gives the log's indices; unset: the row order of problems.parquet."),
    ] = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Read another trainer's rollout log into rollouts.parquet, matching every row to a problem."""
    if (verl_dumps is None) == (acc_records is None):
        raise UserError("sws ingest: pass exactly one of --verl-dumps DIR or --acc-records FILE")
    log_format, log_path = ("verl", verl_dumps) if verl_dumps is not None else ("acc_records", acc_records)
    run_command(run, config, {
        "ingest.format": log_format, "ingest.path": str(log_path),
        "ingest.seed_file": str(seed_file) if seed_file else None,
    }, lambda cfg: run_one(get_stage("ingest"), cfg, run, force=force), "ingest", starts_run=True)


def synthesize(run: Path, steps: str | None, executor: str | None, estimate: bool, config: Path | None, force: bool,
               **options: Any) -> None:
    """Turn the weak problems into new problems with verified reference answers, and print the funnel."""
    from sws.stages.synthesize import parse_steps

    chosen = parse_steps(steps)
    stage = get_stage("synthesize")
    run_command(run, config, {"executor.kind": executor, **option_overrides(stage, options)},
                lambda cfg: run_one(stage, cfg, run, force=force, steps=chosen if steps or not estimate else None,
                                    estimate=estimate), "synthesize", [get_stage(step) for step in chosen])


synthesize.__signature__ = inspect.Signature([
    inspect.Parameter("run", inspect.Parameter.KEYWORD_ONLY, annotation=RunOpt),
    inspect.Parameter("steps", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        str | None, typer.Option("--sub-steps", help="Comma-separated sub-steps to run: extract,combine,generate,"
                                 "rate,label,audit (unset: all; audit only with roles.auditor).")]),
    *option_parameters(get_stage("synthesize")),
    inspect.Parameter("executor", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ExecutorOpt),
    inspect.Parameter("estimate", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, flag("--estimate", help="Run a pilot of synthesize.estimate_share of the budget through every "
                           "sub-step (kept in the request cache for the real run), print the tokens, cost and time "
                           "projected for the whole budget, and stop.")]),
    inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=PipelineOpt),
    inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=ForceOpt),
])
command(epilog="Example: sws synthesize --run runs/demo --sub-steps extract,combine --concept-sets 100")(synthesize)


@command(epilog="Example: sws train initial --run runs/demo --steps 200")
def train(
    kind: Annotated[str, typer.Argument(help="The arm (sws.arms): initial (seed set, writes rollouts.parquet), "
                                        "baseline, augmented, untargeted (synthesize.untargeted_arm), selected "
                                        "(seed ∪ selected, select.arm), random_selected (select.random_arm), "
                                        "oracle_family or oracle_family_large (oracle_family.arm).")],
    run: RunOpt,
    steps: Annotated[int | None, typer.Option(help=with_default("GRPO steps.", "train.initial_steps",
                                                                named="train.KIND_steps"))] = None,
    config: PipelineOpt = None,
    force: Annotated[bool, flag("--force", help="Start over instead of resuming or skipping.")] = False,
    dry_run: Annotated[
        bool, flag("--dry-run", help="verl, or TRL on several GPUs: write the launch (train/KIND/launch.sh "
                           "and its inputs) and print its command without running it.")
    ] = False,
) -> None:
    """GRPO-train a policy: initial on the seed set; baseline, augmented or selected continuing from initial."""
    from sws.arms import arm

    trained = arm(kind)
    overrides = {f"train.{trained.steps_field}": steps}
    if dry_run:
        from sws.stages.train import dry_run as write_launch

        run_command(run, config, overrides, lambda cfg: typer.echo(write_launch(cfg, run, trained.name)), save=False)
        return
    run_command(run, config, overrides, lambda cfg: run_one(get_stage(f"train_{trained.name}"), cfg, run, force=force))


@command("filter", epilog="Example: sws filter --run runs/demo --band 0.25 0.75 --samples 8")
def filter_by_difficulty(
    run: RunOpt,
    band: Annotated[
        tuple[float, float] | None,
        config_option("filter.band", help="Keep problems whose policy accuracy is within LO HI, inclusive."),
    ] = None,
    rollouts: Annotated[int | None, config_option(
        "filter.rollouts", "--samples", "-n", help="Policy samples per problem.")] = None,
    executor: ExecutorOpt = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Keep the labeled problems the initially trained policy solves sometimes, neither never nor always.

    With synthesize.adapt_rounds > 0, problems it never solves first go back to the generator for easier ones
    (rated, labeled and scored in turn), up to that many rounds; filtered.parquet records each one's round."""

    run_command(run, config, {"filter.band": list(band) if band else None, "filter.rollouts": rollouts,
                              "executor.kind": executor},
                lambda cfg: run_one(get_stage("filter"), cfg, run, force=force), "filter")


@command(epilog="Example: sws export verl --run runs/demo --out runs/demo/verl/train.parquet; "
                "sws export hf --run runs/demo --out runs/demo/hf --push me/sws-demo")
def export(
    format: Annotated[str, typer.Argument(help="Target format: verl (RL dataset Parquet) or hf (Hugging Face "
                                          "dataset folder with a dataset card).")],
    run: RunOpt,
    out: Annotated[Path | None, typer.Option(help="verl: output Parquet (unset: <run>/verl/<table>.parquet); "
                                             "hf: output folder (unset: <run>/hf).")] = None,
    table: Annotated[str, typer.Option(help="verl: problem set to export: augmented or problems.")] = "augmented",
    split: Annotated[str, typer.Option(help="verl: value of extra_info.split in every row.")] = "train",
    push: Annotated[str | None, typer.Option(help="hf: upload the folder to this Hugging Face dataset repo "
                                             "(needs HF_TOKEN or `hf auth login`).")] = None,
    license: Annotated[str, typer.Option(help="hf: the card's license id (that of the seed set and the "
                                         "teacher models' outputs).")] = "other",
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Write a problem set as verl's RL dataset Parquet, or the run's problem sets as a Hugging Face dataset."""
    if format == "hf":
        from sws import hf_dataset

        run_command(run, config, {}, lambda cfg: hf_dataset.export(cfg, run, out or run / "hf", license, push),
                    save=False)
        return

    if format != "verl":
        raise UserError(f"export format '{format}' is not known; use: sws export verl|hf --run {run}")
    run_command(run, config, {},
                lambda cfg: run_one(get_stage("export"), cfg, run, force=force, table=table, out=out, split=split))


@command("eval", epilog="Example: sws eval --run runs/demo --samples 8")
def evaluate(
    run: RunOpt,
    k: Annotated[int | None, config_option("eval.k", "--samples", "-n", help="Samples per problem for Avg@k.")] = None,
    benchmarks: Annotated[
        str | None, config_option("eval.benchmarks", help="Comma-separated held-out sets: arith, math500, aime24, "
                                  "aime25, gsm8k (benchmark files, each with its own k, only in the pipeline file).")
    ] = None,
    executor: ExecutorOpt = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Pass@1 and Avg@k of every checkpoint, and the share of the run's weak problems each now solves."""

    run_command(run, config, {"eval.k": k, "eval.benchmarks": benchmarks.split(",") if benchmarks else None,
                              "executor.kind": executor},
                lambda cfg: run_one(get_stage("eval"), cfg, run, force=force), "eval")


@command(epilog="Example: sws sample --run runs/demo --role policy --prompt 'Compute 47+85.' --samples 4")
def sample(
    run: RunOpt,
    prompt: Annotated[str, typer.Option(help="Text to send (for the policy, a problem; else a user message).")],
    role: Annotated[
        str, typer.Option(help="Role whose engine answers: extractor, generator, judges.N, labeler, policy.")
    ] = "policy",
    n: Annotated[int, typer.Option("--samples", "-n", help="Completions to sample.", min=1)] = 1,
    max_tokens: Annotated[int | None, typer.Option(help="Token limit per completion (unset: the role's max_tokens).",
                                                   min=1)] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.", min=0)] = 0,
    config: PipelineOpt = None,
) -> None:
    """Send one prompt to a role's engine and print its completions: check a model or server before a long run."""
    from sws.current_policy import resolved
    from sws.engines import Request, make_engine
    from sws.policy import policy_role
    from sws.prompts import chat

    check_run_dir(run, starts_run=config is not None)  # with --config, a server can be tried before the run
    cfg = load_run_config(run, config, {})
    role_cfg = policy_role(cfg, run) if role == "policy" else resolved(role_config(cfg, role), run, f"roles.{role}.model")
    text = get_world(cfg.world).policy_prompt(prompt) if role == "policy" else {"messages": chat(prompt)}
    request = Request(**text, n=n, temperature=role_cfg.temperature, top_p=role_cfg.top_p,
                      max_tokens=max_tokens or role_cfg.max_tokens, seed=seed)
    engine = make_engine(role_cfg, RunDir(run).request_cache)
    try:
        completions = engine.generate([request])[0]
    finally:
        engine.close()
    for index, completion in enumerate(completions):
        typer.echo(f"--- completion {index} ({completion.tokens} tokens)\n{completion.text}")


@command(epilog="Example: sws compare runs/demo-s0 runs/demo-s1 runs/demo-s2")
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Run directories, each evaluated by `sws eval` "
                                                          "(or each a co-training run).")],
) -> None:
    """Augmented − baseline on the weak problems (and weak_like) across runs (seeds): each run's, their mean, sd
    and standard error, and whether each mean exceeds two standard errors. Over co-training runs: co-trained −
    frozen productive rate, and each arm's held-out accuracy."""
    from sws import compare as comparison
    from sws.cotrain import compare as cotraining

    console = ui.stdout_console()
    if all(map(cotraining.is_cotraining_run, runs)):
        found = cotraining.summaries(runs)
        console.print(cotraining.difference_table(runs, found))
        console.print(cotraining.arms_table(found))
        return
    results = comparison.run_results(runs)
    for measure in comparison.measured(results):
        console.print(comparison.comparison_table(results, measure))
    for table in comparison.where_the_gain_sits(runs):
        console.print(table)
    console.print(comparison.verdict(results))
    console.print(comparison.machine_line(results))
    note = comparison.machine_note(results)
    if note:
        console.print(note)


@command("run", epilog="Example: sws run demo --run runs/demo --seed 1")
def run_pipeline(
    pipeline: Annotated[Path, typer.Argument(help="Pipeline YAML, or a shipped preset's name: "
                                             f"{', '.join(preset_names())}.")],
    run: RunOpt,
    seed: Annotated[int | None, config_option("seed", help="Override the pipeline's seed.")] = None,
    executor: ExecutorOpt = None,
    force: Annotated[bool, flag("--force", help="Rerun every stage, even those already done.")] = False,
    rounds: Annotated[int | None, config_option(
        "rounds.n", "--rounds", min=1, help="Rounds of the method; round r > 1 lives in RUN/rounds/<r>/ and "
        "identifies weaknesses from round r - 1's augmented training.")] = None,
    dry_run: Annotated[bool, flag("--dry-run", help="List every step in order, up to date or why it would run; "
                                  "run and write nothing.")] = False,
) -> None:
    """Run every stage of a pipeline in order, skipping those already done; print the headline."""
    from sws.pipeline import print_headline, print_rounds
    from sws.pipeline import run as run_all

    check_run_dir(run)
    pipeline = pipeline_file(pipeline)
    if dry_run:
        from sws.dry_run import print_plan

        cfg = load_run_config(run, pipeline, {"seed": seed, "executor.kind": executor, "rounds.n": rounds})
        print_plan(cfg, run, force)
        return
    with run_lock(run):
        cfg = load_run_config(run, pipeline, {"seed": seed, "executor.kind": executor, "rounds.n": rounds})
        run_all(cfg, run, force=force, source=pipeline)
    if cfg.cotrain.only:
        from sws.cotrain.summary import print_summary

        print_summary(run)
        return
    print_headline(run)
    print_rounds(run)


def run_one(stage: Stage, cfg: PipelineConfig, run: Path, **options: Any) -> Any:
    """Run one declared stage (imported here, so that `sws --help` loads no stage machinery)."""
    from sws import runner

    return runner.run(stage, cfg, run, **options)


def declared_command(stage: Stage) -> None:
    """`sws <stage> --run DIR [options] [--config FILE] [--force]`, made from the stage's declaration: each of
    its options sets one config field."""
    parameters = [
        inspect.Parameter("run", inspect.Parameter.KEYWORD_ONLY, annotation=RunOpt),
        *option_parameters(stage),
        inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=PipelineOpt),
        inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=ForceOpt),
    ]

    def run_declared(run: Path, config: Path | None, force: bool, **options: Any) -> None:
        run_command(run, config, option_overrides(stage, options), lambda cfg: run_one(stage, cfg, run, force=force),
                    stage.name, [stage])

    run_declared.__signature__ = inspect.Signature(parameters)
    run_declared.__doc__ = stage.summary
    command(stage.command_name, epilog=f"Example: {stage.example}" if stage.example else None)(run_declared)
    if stage.name != stage.command_name:
        command(stage.name, hidden=True)(deprecated_alias(run_declared, stage.name, stage.command_name))


def deprecated_alias(fn: Callable[..., Any], old: str, new: str) -> Callable[..., Any]:
    """`fn` under its name of the release before, saying once that the name changed (kept for one release)."""

    @functools.wraps(fn)
    def alias(*args: Any, **kwargs: Any) -> Any:
        print(f"warning: `sws {old}` is now `sws {new}`; the old name goes in the next release", file=sys.stderr)
        return fn(*args, **kwargs)

    return alias


for declared in all_stages():
    if declared.command is None:
        declared_command(declared)


world_app = typer.Typer(
    cls=Group,
    help="Each world's own commands (the built-in arithmetic world: seed sets, the tiny policy's warm start, its "
    "accuracy).\n\nExample: sws world bootstrap --steps 1500",
    no_args_is_help=True,
)
app.add_typer(world_app, name="world")
for world in all_worlds():
    world.add_commands(world_app, command)


def main() -> None:
    # sws shows its own progress; transformers' and huggingface_hub's tqdm bars (read at their import) only add noise.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    app()
