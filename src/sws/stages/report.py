"""`sws report`: one self-contained HTML page of a run, its plots embedded as base64 PNG (also kept in plots/).

Sections: the run and its roles, category fail ratios and synthesis budget, trajectories of the weak problems,
the synthesis funnel (with the completions cut off at max_tokens), two judges' analyses per category, the
difficulty-band histogram, training curves, the evaluation table, weakness mitigation, the arms side by side
(`sws.arms`: seed only, synthetic, selected; with `select.arm`), and every problem set's teachability
`1 - |2μ - 1|` and gradient-bearing share (0 < μ < 1) under each policy. A section whose inputs are missing says
which command makes them. When a role is played by an engine the world brings (the arith oracle), the page says
what it is, in the world's words.

The report is a declared stage: it reads every table it shows through its declaration (each when present), the
manifests through `StageContext.manifest`, and returns the page and its plots as files.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from sws import answer, arms, gain_by_family, ui
from sws.config import EngineConfig, PipelineConfig
from sws.cotrain import report_section as cotraining
from sws.funnel import FunnelRow, per_kept_problem, read_budget_spending, read_funnel, token_usage
from sws.manifests import environment
from sws.plots import bar_chart, line_chart, new_figure
from sws.report_html import Section, embedded, html_table, paragraph
from sws.run_dir import UNTARGETED, RunDir, in_round
from sws.runner import REJECTED, StageContext, StageOutput
from sws.stage import Stage, all_stages, producer_of
from sws.stages import audit, combine, generate, score
from sws.stages import eval as eval_stage
from sws.stages import filter as filter_stage
from sws.tables import round_name
from sws.world import get_world

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def funnel_steps() -> list[str]:
    """The stages that record a funnel row, in the method's order."""
    return [stage.name for stage in all_stages() if stage.funnel]


def teachability(accuracy: pl.Expr) -> pl.Expr:
    """SynCo's teachability T(μ) = 1 - |2μ - 1|: 1 at μ = 0.5, 0 for problems always or never solved."""
    return 1 - (2 * accuracy - 1).abs()


def gradient_bearing(accuracy: pl.Expr) -> pl.Expr:
    """Whether a GRPO group on the problem has any reward variance, i.e. 0 < μ < 1."""
    return (accuracy > 0) & (accuracy < 1)


class Page:
    """One report being drawn from the stage's context: its tables, the run's manifests, and the figures drawn so
    far, each embedded in the page and kept as a file under plots/report/."""

    def __init__(self, context: StageContext) -> None:
        self.context = context
        self.run_dir = context.run.root
        self.cfg = context.cfg
        self.plots: dict[Path, Callable[[Path], None]] = {}

    def figure(self, figure: Figure, name: str) -> str:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        png = buffer.getvalue()
        # Its own folder: a report plot must never overwrite a stage's output (identify's weak_trajectories.png).
        self.plots[self.context.run.plots / "report" / f"{name}.png"] = lambda path: path.write_bytes(png)
        return embedded(png, name)

    def image(self, path: Path) -> str:
        """A PNG file embedded in the page (no link to the file)."""
        return embedded(path.read_bytes(), path.stem)

    def table(self, name: str) -> pl.DataFrame | None:
        return self.context.tables.get(name)

    def rejected(self, name: str) -> pl.DataFrame | None:
        return self.context.tables.get(name + REJECTED)

    def manifest(self, stage: str) -> dict[str, Any] | None:
        return self.context.manifest(stage)

    def missing(self, name: str) -> str:
        return paragraph(f"Not available yet: run `{producer_of(name)} --run {self.run_dir}`.", "missing")


# ---------------------------------------------------------------- HTML helpers


def arm_names(frame: pl.DataFrame) -> pl.DataFrame:
    """Columns named after an arm renamed to the arm's one name (`answer.name_of`)."""
    return frame.rename({arm: name for arm, name in answer.names().items() if arm in frame.columns})


def named_arms(frame: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """The arm names in `columns` (the checkpoint's name in eval's tables, say) replaced by the arm's one name;
    other values (`base`, `start`) kept."""
    return frame.with_columns(pl.col(column).replace(answer.names()) for column in columns)


def render_page(title: str, sections: Sequence[Section]) -> str:
    toc = "".join(f'<li><a href="#s{i}">{html.escape(s.title)}</a></li>' for i, s in enumerate(sections))
    body = "".join(f'<section id="s{i}"><h2>{html.escape(s.title)}</h2>{s.body}</section>'
                   for i, s in enumerate(sections))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }} td:first-child, th:first-child {{ text-align: left; }}
img {{ max-width: 100%; }} .missing {{ color: #888; font-style: italic; }}
.note {{ background: #fff7e0; border-left: 4px solid #e0a800; padding: 0.6em 1em; }}
</style></head><body><h1>{html.escape(title)}</h1><ul>{toc}</ul>{body}</body></html>
"""


# ---------------------------------------------------------------- sections


def roles_of(cfg: PipelineConfig) -> list[tuple[str, EngineConfig]]:
    """The roles the config sets (a co-training pipeline in the math world sets only its labeler)."""
    roles = [
        ("extractor", cfg.roles.extractor), ("generator", cfg.roles.generator), ("labeler", cfg.roles.labeler),
        ("policy", cfg.roles.policy), *((f"judge {i + 1}", judge) for i, judge in enumerate(cfg.roles.judges or [])),
        *([("categorizer", cfg.roles.categorizer)] if cfg.prepare.categorize and cfg.roles.categorizer else []),
        *([("auditor", cfg.roles.auditor)] if cfg.roles.auditor is not None else []),
    ]
    return [(name, role) for name, role in roles if role is not None]


def built_in_teacher_roles(cfg: PipelineConfig) -> list[str]:
    """The roles played by an engine the world brings (the arith oracle) rather than a model."""
    world = get_world(cfg.world)
    return [name for name, role in roles_of(cfg) if role.engine in world.engines]


def overview_section(page: Page) -> Section:
    cfg = page.cfg
    roles = roles_of(cfg)
    role_table = pl.DataFrame({"role": [name for name, _ in roles], "engine": [role.engine for _, role in roles],
                               "model": [role.model or "(the run's initial checkpoint)" for _, role in roles]})
    body = paragraph(f"Run directory: {page.run_dir} · world: {cfg.world} · seed: {cfg.seed}")
    built_in = built_in_teacher_roles(cfg)
    if built_in and get_world(cfg.world).teacher_note:
        note = get_world(cfg.world).teacher_note.format(roles=", ".join(built_in))
        body += f'<div class="note">{paragraph(note)}</div>'
    return Section("Run", body + html_table(role_table))


def answer_section(page: Page) -> Section:
    """The answer first: each arm on each held-out set and the differences the run was built to show."""
    title = "The answer: each arm on the held-out sets"
    per_problem, sets = page.table("eval/problems"), page.table(eval_stage.SETS)
    if per_problem is None or sets is None:
        return Section(title, page.missing("eval/problems"))
    table = answer.answer_table(per_problem, answer.held_out_sets(sets))
    if table.is_empty():
        return Section(title, paragraph("No held-out set was evaluated for an arm.", "missing"))
    return Section(title, html_table(table) + paragraph(answer.DEFINITION))


def timings_section(page: Page) -> Section:
    stages = page.context.manifests()
    timings = pl.DataFrame(
        {"stage": [m["stage"] for m in stages], "seconds": [float(m["seconds"]) for m in stages],
         "finished": [m.get("finished_at", "") for m in stages]},
        schema={"stage": pl.Utf8, "seconds": pl.Float64, "finished": pl.Utf8},
    )
    body = html_table(timings) if timings.height else paragraph("No stage has run yet.", "missing")
    return Section("Stage timings", body)


def categories_section(page: Page) -> Section:
    categories = page.table("categories")
    if categories is None:
        return Section("Categories: fail ratio and synthesis budget", page.missing("categories"))
    figure, axes = new_figure()
    positions = range(categories.height)
    axes.bar([p - 0.2 for p in positions], categories["fail_ratio"], width=0.4, label="fail ratio")
    axes.bar([p + 0.2 for p in positions], categories["share"], width=0.4, label="budget share")
    axes.set_xticks(list(positions), categories["category"].to_list(), rotation=30)
    axes.set_ylim(0, 1)
    axes.legend()
    axes.set_title("Weak share per category and the synthesis budget it gets")
    body = page.figure(figure, "categories") + html_table(categories)
    return Section("Categories: fail ratio and synthesis budget", body)


def trajectories_section(page: Page) -> Section:
    title = "Trajectories of the weak problems during initial training"
    weakness = page.table("weakness")
    if weakness is None:
        return Section(title, page.missing("weakness"))
    from matplotlib.ticker import MaxNLocator

    weak = weakness.filter(pl.col("weak")).sort("category", "problem_id")
    colours = {category: f"C{i}" for i, category in enumerate(sorted(set(weak["category"])))}
    per_category = page.cfg.report.max_trajectories // max(1, len(colours))
    shown = weak.group_by("category", maintain_order=True).head(per_category)
    figure, axes = new_figure(width=8)
    for row in shown.iter_rows(named=True):
        axes.plot(range(len(row["accs"])), row["accs"], color=colours[row["category"]], alpha=0.35, linewidth=1,
                  marker="o", markersize=3)
    for category, colour in colours.items():
        axes.plot([], [], color=colour, label=category)
    if colours:
        axes.legend(fontsize=7)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("record (each time the problem was rolled out)")
    axes.set_ylabel("accuracy of the rollout group")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title(f"{shown.height} of {weak.height} weak problems")
    counts = (weakness.group_by("category").agg(pl.len().alias("problems"), pl.col("weak").sum().alias("weak"),
                                                pl.col("max_acc").mean().alias("mean max_acc"))
              .sort("category"))
    return Section(title, page.figure(figure, "weak_trajectories") + html_table(counts))


# The funnel's names for steps whose stage name says less.
FUNNEL_LABELS = {filter_stage.STAGE: "band", "mix": "added"}


def funnel_section(page: Page) -> Section:
    title = "Synthesis funnel"
    rows: list[FunnelRow] = read_funnel(page.context.manifest, funnel_steps())
    if not rows:
        return Section(title, page.missing("labeled"))
    table = pl.DataFrame({
        "step": [FUNNEL_LABELS.get(row.step, row.step) for row in rows], "in": [row.rows_in for row in rows],
        "kept": [row.kept for row in rows],
        "rejected": [sum(row.rejected.values()) for row in rows],
        "rejected by reason": [", ".join(f"{r} {n}" for r, n in row.rejected.items()) or "–" for row in rows],
        "cut off at max_tokens": [f"{row.truncated} of {row.completions}" for row in rows],
    })
    figure = bar_chart({FUNNEL_LABELS.get(row.step, row.step): float(row.kept) for row in rows},
                       title="Rows kept after each step of synthesis", ylabel="rows kept")
    low, high = page.cfg.filter.band
    body = (paragraph("Each step of synthesis in order, the rows it took in, kept and rejected (by reason). band: the "
                      f"difficulty filter, which keeps a problem the initial policy solves in a share of its samples "
                      f"within [{low:g}, {high:g}] (filter.band); added: the problems mix adds to the seed set.")
            + page.figure(figure, "funnel") + html_table(table))
    spending = read_budget_spending(page.context.manifest, combine.STEP, generate.STEP)
    if spending is not None and spending.height:
        body += ("<h3>How each category's budget was spent</h3>"
                 + paragraph("Drawn concept sets (synthesize.sampling: draws; a set drawn again is asked for "
                             "again as another variant, an instance) or distinct ones, filled with other levels and "
                             "instances (distinct with synthesize.fill_budget); the share of requested sets inside "
                             "one weak problem's concept list, and the share the category can show (where the "
                             "world knows).")
                 + html_table(spending))
    return Section(title, body)


JUDGEMENTS_PER_CATEGORY = 2
MAX_SHOWN_CHARS = 600


def judges_section(page: Page) -> Section:
    """Two judges' analyses per category, so a reader can see whether the judges read the problems."""
    title = "What the judges wrote: two analyses per category"
    kept, rejected = page.table("rated"), page.rejected("rated")
    if kept is None:
        return Section(title, page.missing("rated"))
    columns = ["category", "problem", "verdicts", "reasoning"]
    rated = pl.concat([table.select(columns) for table in (kept, rejected) if table is not None and
                       "reasoning" in table.columns])
    shown = []
    for category, problem, verdicts, reasoning in rated.sort("category").iter_rows():
        analyses = [(judge, verdict, analysis) for judge, analyses in json.loads(reasoning).items()
                    for verdict, analysis in zip(json.loads(verdicts)[judge], analyses, strict=True) if analysis]
        if analyses and sum(row["category"] == category for row in shown) < JUDGEMENTS_PER_CATEGORY:
            judge, verdict, analysis = analyses[0]
            shown.append({"category": category, "problem": _shortened(problem), "judge": judge,
                          "verdict": verdict, "analysis": _shortened(analysis)})
    if not shown:
        return Section(title, paragraph("No judgement in rated.parquet carries an analysis."))
    return Section(title, html_table(pl.DataFrame(shown)))


def _shortened(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + " …"


def band_section(page: Page) -> Section:
    title = "Difficulty band: accuracy of the initial policy on the labeled synthetic problems"
    kept = page.table("filtered")
    if kept is None:
        return Section(title, page.missing("filtered"))
    rejected = page.rejected("filtered")
    total = kept.height + (0 if rejected is None else rejected.height)
    low, high = page.cfg.filter.band
    histogram = page.context.run.plots / filter_stage.PLOT_NAME
    body = page.image(histogram) if histogram.exists() else ""
    body += paragraph(f"{kept.height} of {total} labeled problems in the band [{low:g}, {high:g}].")
    return Section(title, body + rounds_table(kept))


def rounds_table(kept: pl.DataFrame) -> str:
    """Per category, how many problems each adaptive round added to the band (when there were rounds)."""
    if "round" not in kept.columns or kept["round"].max() in (None, 0):
        return ""
    counts = (kept.group_by("category", "round").len().sort("round")
              .with_columns(pl.format("round {}", pl.col("round")).alias("added by"))
              .pivot(on="added by", index="category", values="len", sort_columns=False).fill_null(0).sort("category"))
    return (paragraph("Problems in the band per category and adaptive round (round 0: the original synthesis; "
                      "round r: easier or harder problems written from round r - 1's problems that the policy "
                      "never or always solved; synthesize.adapt_rounds).") + html_table(counts))


def training_section(page: Page) -> Section:
    title = "Training curves"
    curves = {arm.name: page.table(arm.curve) for arm in arms.ARMS}
    series = {answer.name_of(arms.arm(name)): curve["reward"].rolling_mean(window_size=10, min_samples=1).to_list()
              for name, curve in curves.items() if curve is not None and curve.height}
    if not series:
        return Section(title, page.missing(arms.ARMS[0].curve))
    figure = line_chart(series, title="Mean reward per GRPO step (rolling mean over 10 steps)",
                        xlabel="step", ylabel="reward (share of correct rollouts)", ylim=(0, 1))
    steps = pl.DataFrame({"arm": list(series), "steps": [len(values) for values in series.values()],
                          "last reward (rolling)": [values[-1] for values in series.values()]})
    caption = paragraph("Each arm's mean reward on its own training set, so the curves compare how each arm learned "
                        "its set, not the arms with each other (the held-out sets do that, at the top).")
    return Section(title, caption + page.figure(figure, "training_curves") + html_table(steps))


def evaluation_section(page: Page) -> Section:
    title = "Evaluation: Pass@1 (greedy) and Avg@k"
    benchmarks = page.table("eval/benchmarks")
    if benchmarks is None:
        return Section(title, page.missing("eval/benchmarks"))
    benchmarks = named_arms(benchmarks, "checkpoint")
    overall = benchmarks.filter(pl.col("category") == eval_stage.OVERALL)
    wide = overall.pivot(on="checkpoint", index="eval_set", values=["pass1", "avg_k"], sort_columns=False)
    per_category = benchmarks.filter(pl.col("category") != eval_stage.OVERALL).pivot(
        on="checkpoint", index=["eval_set", "category"], values="pass1", sort_columns=False)
    body = (paragraph(f"Pass@1: the share of problems answered right greedily (one answer at temperature 0); "
                      f"Avg@k: the share of k = {page.cfg.eval.k} samples at temperature {page.cfg.eval.temperature} "
                      "that are right. The seed set is the training set, the other sets are held out. Checkpoints: "
                      "base is train.init_model before any training; start is the policy the world builds for the "
                      "initial arm (the arith world's warm-started tiny policy); the others are the arms: initial is the "
                      "preliminary run's policy, the others continue from it.")
            + html_table(wide) + "<h3>Pass@1 per category</h3>" + html_table(per_category))
    return Section(title, body)


def benchmarks_section(page: Page) -> Section:
    """Each benchmark's Pass@1 and Avg@k (its own k) per checkpoint, their average, and every held-out set's
    size and overlap with the training sets, from summary.json."""
    title = "Benchmarks: Pass@1 and Avg@k, with the average over benchmarks"
    if not page.context.run.summary.is_file():
        return Section(title, page.missing("eval/benchmarks"))
    summary = eval_stage.read_summary(page.run_dir)
    rows = [{"checkpoint": answer.names().get(checkpoint, checkpoint), "benchmark": name, "k": scores.get("k"), "n": scores.get("n"),
             "Pass@1": scores["pass1"], "Avg@k": scores["avg_k"]}
            for checkpoint, per_set in summary.get("benchmarks", {}).items() for name, scores in per_set.items()]
    held_out = [{"held-out set": name, "problems": sizes["n"], "overlap with training sets": sizes["overlap"]}
                for name, sizes in summary.get("held_out", {}).items()]
    body = (paragraph("`average` is the unweighted mean over the benchmarks; `base` is train.init_model before "
                      "any training.") + (html_table(pl.DataFrame(rows)) if rows else paragraph("No benchmark."))
            + "<h3>Held-out sets</h3>"
            + paragraph("No held-out set holds a problem any arm trains on; recompute the overlap from "
                        "eval/problems.parquet and the training sets: "
                        + ", ".join(f"{name}.parquet" for name in arms.training_sets()) + ".")
            + (html_table(pl.DataFrame(held_out)) if held_out else paragraph("No held-out set.")))
    return Section(title, body)


def contamination_section(page: Page) -> Section:
    """The ten generated problems nearest to a benchmark problem (embedding cosine), from generate's manifest."""
    title = "Decontamination: the generated problems closest to a benchmark"
    manifest = page.manifest(generate.STEP)
    if manifest is None:
        return Section(title, page.missing("synthetic"))
    pairs = manifest.get("info", {}).get("closest_benchmark_pairs", [])
    threshold = page.cfg.synthesize.contamination_similarity
    if not pairs:
        return Section(title, paragraph("No benchmark problem to compare with (synthesize.reference_files and the "
                                        "benchmark files of eval.benchmarks), or no generated problem."))
    table = pl.DataFrame(pairs).select(
        pl.col("similarity").alias("cosine"), pl.col("problem").map_elements(_shortened, return_dtype=pl.Utf8),
        "benchmark", pl.col("benchmark_problem").map_elements(_shortened, return_dtype=pl.Utf8))
    return Section(title, paragraph(f"Problems at cosine {threshold} or above are rejected as contaminated "
                                    "(synthesize.contamination_similarity); exact and near-exact copies of the text "
                                    "are rejected before.") + html_table(table))


# A category with fewer problems is shown with its n in the tables and never drawn as a share: one problem would
# be a bar of 0 or 100 %.
MIN_DRAWN = 10


def mitigation_figure(wide: pl.DataFrame, counts: pl.DataFrame) -> Figure | None:
    """Per category with at least MIN_DRAWN weak problems, the share each checkpoint solves (None: no such one)."""
    drawn = wide.join(counts, on="category").filter(pl.col("n_weak") >= MIN_DRAWN)
    if drawn.is_empty():
        return None
    checkpoints = [c for c in wide.columns if c != "category"]
    figure, axes = new_figure(width=8)
    width = 0.8 / max(1, len(checkpoints))
    for i, checkpoint in enumerate(checkpoints):
        axes.bar([p + i * width for p in range(drawn.height)], drawn[checkpoint].fill_null(0), width=width,
                 label=checkpoint)
    axes.set_xticks([p + 0.4 - width / 2 for p in range(drawn.height)],
                    [f"{category} (n={n})" for category, n in drawn.select("category", "n_weak").iter_rows()],
                    rotation=30)
    axes.set_ylim(0, 1)
    axes.set_xlabel("category (n: its previously weak problems)")
    axes.set_ylabel("share of them solved (greedy)")
    axes.set_title("Previously weak problems each policy solves")
    axes.legend()
    return figure


def mitigation_section(page: Page) -> Section:
    title = "Weakness mitigation: share of the previously weak problems each policy solves"
    weakness = page.table("eval/weakness")
    if weakness is None:
        return Section(title, page.missing("eval/weakness"))
    wide = arm_names(weakness.pivot(on="checkpoint", index="category", values="solved", sort_columns=False))
    counts = weakness.filter(pl.col("checkpoint") == weakness["checkpoint"][0]).select("category", "n_weak")
    figure = mitigation_figure(wide, counts)
    small = counts.filter(pl.col("n_weak") < MIN_DRAWN)["category"].to_list()
    rule = page.cfg.identify
    body = paragraph("Weak problems: seed problems whose best rollout-group accuracy during the initial policy's "
                     f"training stayed at most {rule.max_acc:g} and whose accuracy trend (slope) stayed at most "
                     f"{rule.max_slope:g} (identify.max_acc, identify.max_slope). The share of them each policy "
                     "solves greedily (Pass@1, one answer at temperature 0); they are "
                     "training problems, so this is a diagnostic, not the answer (held-out sets above). The plot "
                     "compares the policies per category"
                     + (f"; categories with fewer than {MIN_DRAWN} weak problems are left out of it and shown with "
                        f"their n in the table ({', '.join(small)})" if small else "") + ".")
    if figure is not None:
        body += page.figure(figure, "weakness_mitigation")
    body += html_table(wide.join(counts, on="category"))
    return Section(title, body + weak_like_table(page) + precision_table(page) + weak_exposure_table(page))


def evaluated_arms(weakness: pl.DataFrame) -> dict[str, str]:
    """The arms some difference compares (`sws.arms`) that eval evaluated, by checkpoint name, with their labels."""
    return {arm.name: arm.label for arm in arms.compared() if arm.name in set(weakness["checkpoint"])}


def by_arm(frame: pl.DataFrame, index: list[str], value: str, labels: dict[str, str]) -> pl.DataFrame:
    """`value` per `index` row with one column per arm of `labels`, then each difference between them, in points."""
    wide = (frame.filter(pl.col("checkpoint").is_in(list(labels)))
            .pivot(on="checkpoint", index=index, values=value, sort_columns=False))
    wide = wide.select(*index, *labels).rename(labels)
    return wide.with_columns((100 * (pl.col(labels[ahead]) - pl.col(labels[behind])))
                             .map_elements("{:+.1f}".format, return_dtype=pl.Utf8)
                             .alias(f"{labels[ahead]} − {labels[behind]} (points)")
                             for ahead, behind in arms.differences() if {ahead, behind} <= set(labels))


def added_problems(page: Page, labels: dict[str, str]) -> pl.DataFrame:
    """Per category and overall, the problems each arm's training set adds to the seed set."""
    seed = page.table("problems")
    tables = {arm.label: page.table(arm.training_set) for arm in arms.compared() if arm.name in labels}
    tables = {arm: table for arm, table in tables.items() if table is not None}
    if seed is None or not tables:
        return pl.DataFrame()
    added = pl.concat([table.join(seed.select("problem_id"), on="problem_id", how="anti")
                       .select("category", pl.lit(arm).alias("arm")) for arm, table in tables.items()])
    counts = pl.concat([added, added.with_columns(pl.lit(eval_stage.OVERALL).alias("category"))])
    wide = counts.group_by("category", "arm").len().pivot(on="arm", index="category", values="len").fill_null(0)
    nothing_added = [pl.lit(0, dtype=pl.UInt32).alias(arm) for arm in tables if arm not in wide.columns]
    return (wide.with_columns(*nothing_added).select("category", *tables)
            .sort(pl.col("category") == eval_stage.OVERALL, "category"))


def weak_family_shares(page: Page, labels: dict[str, str]) -> pl.DataFrame:
    """Per arm: the problems its training set adds and the share of them in a weak problem's family (the world's
    tag); empty where the world tags no families."""
    seed, weakness = page.table("problems"), page.table("weakness")
    family_of = page.context.world.family_of
    if seed is None or weakness is None:
        return pl.DataFrame()
    weak_texts = seed.join(weakness.filter(pl.col("weak")).select("problem_id"), on="problem_id")["problem"]
    weak_families = {family_of(text) for text in weak_texts} - {None}
    rows = []
    for arm in arms.compared():
        table = page.table(arm.training_set)
        if arm.name not in labels or table is None or not weak_families:
            continue
        added = table.join(seed.select("problem_id"), on="problem_id", how="anti")["problem"].to_list()
        in_weak = sum(family_of(text) in weak_families for text in added)
        rows.append({"arm": arm.label, "added": len(added),
                     "in a weak family": round(in_weak / len(added), 3) if added else None})
    return pl.DataFrame(rows)


def efficiency_line(page: Page) -> str:
    """The share of the family oracle's gain over the baseline on weak_like (Avg@k) that synthesis recovers."""
    benchmarks = page.table("eval/benchmarks")
    if benchmarks is None:
        return ""
    like = benchmarks.filter((pl.col("eval_set") == eval_stage.WEAK_LIKE_SET)
                             & (pl.col("category") == eval_stage.OVERALL))
    avg_k = dict(zip(like["checkpoint"].to_list(), like["avg_k"].to_list(), strict=True))
    if not {"baseline", "augmented", "oracle_family"} <= set(avg_k):
        return ""
    ceiling = avg_k["oracle_family"] - avg_k["baseline"]
    gained = avg_k["augmented"] - avg_k["baseline"]
    ratio = f"{100 * gained / ceiling:.0f} %" if ceiling > 0 else "undefined (no gain to recover)"
    return paragraph(f"Efficiency on weak_like (Avg@k): synthetic − seed only {100 * gained:+.1f} points against the "
                     f"family oracle's {100 * ceiling:+.1f} (the ideal targeted data, as many problems): synthesis "
                     f"recovers {ratio} of it in this run; `sws compare` gives it over seeds.")


def arms_section(page: Page) -> Section:
    """Seed only, synthetic and selected (select.arm): each continues from the initial policy for the same steps."""
    title = "Synthesis against selection: seed only, synthetic and selected on the same steps"
    weakness = page.table("eval/weakness")
    labels = evaluated_arms(weakness) if weakness is not None else {}
    if not set(labels) - set(arms.HEADLINE):
        return Section(title, paragraph(
            "No selected arm in this run: set select.arm: true (with mix.sources: [synthetic]) to also train seed ∪ "
            "the pool problems nearest the weak ones (sws select) for as many steps as augmented, and compare.",
            "missing"))
    steps = {arm.label: (curve.height if (curve := page.table(arm.curve)) is not None else None)
             for arm in arms.compared() if arm.name in labels}
    budget = ("as many pool problems as the band filter kept synthetic ones (select.budget empty)"
              if page.cfg.select.budget is None else f"select.budget = {page.cfg.select.budget} pool problems")
    body = paragraph(
        "Each arm continues from the initial policy with the same GRPO settings: seed only (the baseline) on the "
        "seed set, synthetic (augmented) on seed ∪ the synthetic problems the band filter kept, selected on seed ∪ "
        f"the pool problems sws select took nearest the weak ones, {budget}, split over the categories by fail "
        f"ratio; the controls, where trained: untargeted on seed ∪ the same synthesis fed by random seed problems, "
        f"random pool on seed ∪ as many pool problems drawn at random. "
        f"GRPO steps: {', '.join(f'{arm} {count}' for arm, count in steps.items())}. Differences are in "
        "points; one run's difference is mostly noise, `sws compare` gives them over seeds.")
    train = page.cfg.train
    if train.online_filter is not None and train.online_filter_arms == "augmented":
        body += paragraph(
            f"Confound: the online filter (train.online_filter {list(train.online_filter)}) drops rollout groups in "
            "the augmented and untargeted arms only (train.online_filter_arms: augmented, as the authors' scripts), "
            "so part of any difference to the other arms may be the filter's.", "missing")
    body += efficiency_line(page)
    added = added_problems(page, labels)
    if added.height:
        body += "<h3>Problems each arm adds to the seed set</h3>" + html_table(added)
    families = weak_family_shares(page, labels)
    if families.height:
        body += ("<h3>Added problems in the weak problems' families</h3>"
                 + paragraph("The share of each arm's added problems whose family (the world's tag) is that of a "
                             "weak problem: the family oracle adds only those, by construction.")
                 + html_table(families))
    counts = weakness.filter(pl.col("checkpoint") == weakness["checkpoint"][0]).select("category", "n_weak")
    body += ("<h3>Previously weak problems solved (greedy)</h3>"
             + html_table(by_arm(weakness, ["category"], "solved", labels).join(counts, on="category", how="left")))
    benchmarks = page.table("eval/benchmarks")
    if benchmarks is not None:
        like = benchmarks.filter(pl.col("eval_set") == eval_stage.WEAK_LIKE_SET)
        if like.height:
            body += ("<h3>Fresh problems of the weak problems' families (weak_like), Pass@1</h3>"
                     + html_table(by_arm(like, ["category"], "pass1", labels)))
        overall = benchmarks.filter((pl.col("category") == eval_stage.OVERALL)
                                    & (pl.col("eval_set") != eval_stage.WEAK_LIKE_SET))
        if overall.height:
            body += ("<h3>Every evaluation set, Pass@1 (the seed set is the training set)</h3>"
                     + html_table(by_arm(overall, ["eval_set"], "pass1", labels)))
            per_category = benchmarks.filter((pl.col("category") != eval_stage.OVERALL)
                                             & ~pl.col("eval_set").is_in([eval_stage.WEAK_LIKE_SET, eval_stage.SEED_SET]))
            if per_category.height:
                body += ("<h3>Held-out sets per category, Pass@1</h3>"
                         + html_table(by_arm(per_category, ["eval_set", "category"], "pass1", labels)))
    return Section(title, body)


def gain_section(page: Page) -> Section:
    """Each difference on the fresh problems of the weak problems' families, by category and by family."""
    title = "Where the gain sits: each difference on weak_like, by category and by the world's family"
    problems = page.table("eval/problems")
    found = gain_by_family.effects(problems, page.context.world.family_of) if problems is not None else None
    if found is None or found.is_empty():
        return Section(title, page.missing("eval/problems") if problems is None else paragraph(
            "No weak_like problems were evaluated for two compared arms.", "missing"))
    return Section(title, paragraph(
        "Avg@k of each arm and the difference in points, per category and per family (the world's tag: the skills "
        "a problem needs). One run's per-family difference rests on few problems; `sws compare` gives the mean "
        "over seeds.") + html_table(named_arms(found, "ahead", "behind").with_columns(
            pl.col("^.*avg_k$", "points").round(3))) + concepts_table(page))


def concepts_table(page: Page) -> str:
    """How closely each synthesis's kept problems follow the weak problems' concepts (targeted and untargeted)."""
    weak_concepts = page.table("concepts")
    kept = {name: frame for name, table in (("targeted", "filtered"), ("untargeted", f"{UNTARGETED}/filtered"))
            if (frame := page.table(table)) is not None and "concepts" in frame.columns}
    if weak_concepts is None or not kept:
        return ""
    return (paragraph("The kept synthetic problems whose concepts follow the weak problems' (as the extractor "
                      "listed them): targeted synthesis draws its concept sets from them, the untargeted control "
                      "from random seed problems.") + html_table(gain_by_family.concept_match(kept, weak_concepts)))


def weak_like_table(page: Page) -> str:
    """Pass@1 on fresh problems of the weak problems' families, when eval measured it (the arith world)."""
    benchmarks = page.table("eval/benchmarks")
    like = None if benchmarks is None else benchmarks.filter(pl.col("eval_set") == eval_stage.WEAK_LIKE_SET)
    if like is None or like.height == 0:
        return ""
    wide = arm_names(like.pivot(on="checkpoint", index="category", values="pass1", sort_columns=False))
    return (paragraph("Fresh problems of the weak problems' families (arith.n_weak_like, drawn over the weak "
                      "problems in turn; none is a problem any checkpoint trained on): a policy that learned the "
                      "skill solves more of them, one that learned only the weak problems does not.")
            + html_table(wide))


def precision_table(page: Page) -> str:
    """Each headline share, greedy and over k samples, with its standard error (summary.json)."""
    if not page.context.run.summary.is_file():
        return ""
    summary = eval_stage.read_summary(page.run_dir)

    def share(prefix: str, name: str) -> float | None:
        if name != eval_stage.DIFFERENCE:
            return summary.get(f"{prefix}_{name}", {}).get("overall")
        ahead, behind = (share(prefix, arm) for arm in arms.HEADLINE)
        return None if ahead is None or behind is None else ahead - behind

    rows = [{"set": eval_set, "policy": answer.names().get(name, name), "greedy": share(greedy, name), "greedy SE": error["pass1"],
             "avg@k": share(sampled, name), "avg@k SE": error["avg_k"]}
            for eval_set, (greedy, sampled) in eval_stage.SET_SHARES.items()
            for name, error in summary.get("standard_errors", {}).get(eval_set, {}).items()]
    if not rows:
        return ""
    return (paragraph("Precision of one run: each share with its standard error over the set's problems; the "
                      "difference's is paired, problem by problem. Differences between seeds are larger "
                      "(`sws compare`).")
            + html_table(pl.DataFrame(rows)))


def weak_exposure_table(page: Page) -> str:
    """How often each later run drew the weak problems into a GRPO batch: a policy this small learns the problems
    it trains on, so an arm that revisits them more solves more of them without learning more of the skill."""
    weakness = page.table("weakness")
    logs = {arm.name: log for arm in arms.continuing() if (log := page.table(arm.rollouts)) is not None}
    if weakness is None or not logs or not weakness["weak"].any():
        return ""
    draws = gain_by_family.weak_draws(logs, weakness.filter(pl.col("weak"))["problem_id"])
    return (paragraph("How often each run drew the weak problems into a training batch (its rollout log). The "
                      "baseline trains on the seed set alone and so revisits the weak problems more often than "
                      "an arm whose set also holds added problems.") + html_table(named_arms(draws, "arm")))


def accuracy_sets(page: Page) -> pl.DataFrame:
    """Per-problem accuracy μ of every problem set under every policy that sampled it.

    Evaluated sets come from eval/problems; the synthetic sets from the difficulty filter (initial policy);
    the augmented set is the seed set's μ under the initial policy plus the in-band synthetic problems'.
    A problem none of whose samples could be graded has no μ and is left out.
    """
    columns = ["problem_set", "policy", "problem_id", "accuracy"]
    frames = []
    per_problem = page.table("eval/problems")
    evaluated = None
    if per_problem is not None:
        evaluated = per_problem.select(
            pl.col("eval_set").alias("problem_set"), pl.col("checkpoint").alias("policy"), "problem_id",
            pl.when(pl.col("n") > 0).then(pl.col("n_correct") / pl.col("n")).alias("accuracy"))
        frames.append(evaluated)
    kept, rejected = page.table("filtered"), page.rejected("filtered")
    if kept is not None:
        def as_set(rows: pl.DataFrame, name: str) -> pl.DataFrame:
            return rows.select(pl.lit(name).alias("problem_set"), pl.lit("initial").alias("policy"),
                               pl.col("syn_id").alias("problem_id"), "accuracy")

        in_band = as_set(kept, "synthetic (in band)")
        labeled = kept if rejected is None else pl.concat([kept.select("syn_id", "accuracy"),
                                                           rejected.select("syn_id", "accuracy")])
        frames += [as_set(labeled, "synthetic (labeled)"), in_band]
        if evaluated is not None:
            seed = evaluated.filter((pl.col("problem_set") == eval_stage.SEED_SET) & (pl.col("policy") == "initial"))
            if seed.height:
                frames.append(pl.concat([seed, in_band]).with_columns(pl.lit("augmented").alias("problem_set")))
    return pl.concat([frame.select(columns) for frame in frames]).drop_nulls("accuracy") if frames else pl.DataFrame()


def teachability_section(page: Page) -> Section:
    title = "Teachability and gradient-bearing share of every problem set"
    accuracies = accuracy_sets(page)
    if accuracies.is_empty():
        return Section(title, page.missing("eval/problems"))
    table = (accuracies.group_by("problem_set", "policy", maintain_order=True)
             .agg(pl.len().alias("problems"), pl.col("accuracy").mean().alias("mean μ"),
                  teachability(pl.col("accuracy")).mean().alias("teachability"),
                  gradient_bearing(pl.col("accuracy")).mean().alias("gradient-bearing share")))
    body = paragraph("μ is a problem's accuracy over k samples of the policy; teachability 1 - |2μ - 1|; "
                     "gradient-bearing: 0 < μ < 1, the problems on which a GRPO group has reward variance. "
                     "Synthetic sets are measured by the difficulty filter with the initial policy.")
    return Section(title, body + html_table(table))


def environment_section(page: Page) -> Section:
    title = "Environment"
    evaluated = page.context.run.summary.is_file()
    recorded = eval_stage.read_summary(page.run_dir).get("environment", {}) if evaluated else environment()
    settings = ", ".join(f"{name}={value}" for name, value in recorded.get("kernel_settings", {}).items())
    rows = [("CPU", recorded.get("cpu")), ("CPU cores", recorded.get("cpu_count")),
            ("CPU kernels", recorded.get("cpu_kernels")), ("kernel settings", settings or "none"),
            ("Python", recorded.get("python")),
            ("platform", recorded.get("platform")),
            *((package, version) for package, version in sorted(recorded.get("versions", {}).items()))]
    body = paragraph(f"Where {'`sws eval`' if evaluated else 'this report'} ran. Training and sampling use float "
                     "kernels chosen by the CPU's vector instructions (CPU kernels) and library versions, so the "
                     "same config and seed give the same numbers only where these match; `make demo` pins the "
                     "kernels (ATEN_CPU_CAPABILITY, MKL_CBWR) to the AVX2 path.")
    table = pl.DataFrame({"component": [name for name, _ in rows], "version": [str(value) for _, value in rows]})
    return Section(title, body + html_table(table))


def model_call_stages(cfg: PipelineConfig) -> list[str]:
    """The stages whose manifests count tokens: the synthesis steps and the filter's scoring, then those of each
    adaptive round (`adapt/round-<r>/...`)."""
    steps = [stage.name for stage in all_stages() if stage.synthesis_step and stage.roles] + [score.STEP]
    return [round_name(step, adapt_round) for adapt_round in range(cfg.synthesize.adapt_rounds + 1) for step in steps]


def tokens_section(page: Page) -> Section:
    title = "Tokens and cost"
    filtered = page.table("filtered")
    used = token_usage(page.context.manifest, model_call_stages(page.cfg), page.cfg.pricing)
    if not used.height:
        return Section(title, paragraph("No stage of this run has recorded its tokens yet."))
    priced = ", ".join(f"{role} ${price.input:g} / ${price.output:g}" for role, price in page.cfg.pricing.items())
    body = paragraph(
        "Prompt and completion tokens of every model call, per step and role (what the completions cost when "
        "they were generated, the request cache's answers included), and per problem kept by the filter. "
        + (f"Prices per million input / output tokens: {priced}." if priced else
           "Set `pricing` per role (dollars per million input and output tokens) to see the cost."))
    if filtered is not None:
        body += paragraph(per_kept_problem(used, filtered.height, "filtered") + ".")
    return Section(title, body + html_table(used))


def audit_section(page: Page) -> Section:
    title = "Label audit"
    manifest = page.manifest(audit.STEP)
    if manifest is None or "wrong_label_rate" not in manifest.get("info", {}):
        return Section(title, paragraph("The labels were not audited: set roles.auditor (a model that solves each "
                                        "labeled problem without seeing its label) to check them."))
    info = manifest["info"]
    rate = info["wrong_label_rate"]
    body = paragraph(
        f"The auditor solved {info['audited']} labeled problems without seeing their labels and contradicted "
        f"{info['disagrees']} of the {info['judged']} it answered: an estimated {rate['rate']:.1%} of the labels "
        f"are wrong (95% interval {rate['low']:.1%} to {rate['high']:.1%}). The contradicted ones are quarantined "
        "in audited.rejected.parquet as audit_disagrees, with the label and the auditor's answer.")
    filter_info = (page.manifest(filter_stage.STAGE) or {}).get("info", {})
    if filter_info.get(filter_stage.POLICY_DISAGREES):
        body += paragraph(f"The filter rejected {filter_info[filter_stage.POLICY_DISAGREES]} more as "
                          "policy_disagrees: every policy sample stated one answer other than the label.")
    return Section(title, body)


def rounds_section(page: Page) -> Section:
    """`sws run --rounds N`: the headline across rounds, each round's numbers, and the weakness ledger."""
    from sws.stages import rounds

    title = "Rounds: weaknesses across rounds"
    per_round, ledger = page.table("rounds_summary"), page.table("ledger")
    if per_round is None or ledger is None:
        run = page.context.run.round_of
        if run is not None:
            return Section(title, paragraph(f"This is round {Path(page.run_dir).name} of {run.root}; the rounds "
                                            f"side by side and the weakness ledger are in {run.report}."))
        return Section(title, paragraph("No ledger here: `sws run PIPELINE --rounds N` writes it in the run's own "
                                        "folder (round r > 1 runs in rounds/<r>/).", "missing"))
    numbers = per_round["round"].to_list()
    figure, axes = new_figure(width=8)
    columns = [f"weak_solved_{arm.name}" for arm in arms.every_round()] + ["resolved_share"]
    for column in (column for column in columns if column in per_round.columns):
        axes.plot(numbers, per_round[column].cast(pl.Float64).to_list(), marker="o", label=column)
    axes.set_xticks(numbers)
    axes.set_ylim(0, 1)
    axes.set_xlabel("round")
    axes.set_title("Each round's weak problems solved (greedy), and the share of earlier weak problems resolved")
    axes.legend(fontsize=8)
    headline = page.figure(figure, "rounds_headline")
    counts = ledger.group_by("round", "status").len().pivot(on="status", index="round", values="len").fill_null(0)
    statuses = [status for status in rounds.STATUSES if status in counts.columns]
    counts = counts.sort("round").select("round", *statuses)
    figure, axes = new_figure(width=8)
    bottom = [0] * counts.height
    for status in statuses:
        axes.bar(counts["round"].to_list(), counts[status].to_list(), bottom=bottom, label=status)
        bottom = [low + count for low, count in zip(bottom, counts[status].to_list(), strict=True)]
    axes.set_xticks(counts["round"].to_list())
    axes.set_xlabel("round")
    axes.set_ylabel("problems weak in this or an earlier round")
    axes.set_title("Weakness ledger: status of every weak problem, round by round")
    axes.legend(fontsize=8)
    previous = ledger.select(pl.col("round") + 1, "problem_id", pl.col("status").alias("before"))
    flow = (ledger.join(previous, on=["round", "problem_id"], how="left")
            .with_columns(pl.col("before").fill_null("(not weak yet)"))
            .group_by("round", "before", "status").len().sort("round", "before", "status"))
    body = (paragraph("Round 1 is this run; round r > 1 (rounds/<r>/) identified the weak problems of round r − 1's "
                      "augmented training log, synthesized for them, and trained on from round r − 1's augmented "
                      "policy; its baseline trained as long from the same policy on round r − 1's augmented set. "
                      "weak_solved_*: the share of the round's own weak problems each policy solves; judge_*: the "
                      "round's judge verdicts (reference_*: the fixed judge's, when one is set); all_solved_share: "
                      "the share of band-filter problems the policy solved in every rollout.")
            + headline + html_table(per_round) + page.figure(figure, "rounds_ledger_flow")
            + "<h3>Flow: each weak problem's status after its status the round before</h3>" + html_table(flow))
    for number in numbers[1:]:
        folder = page.context.run.round(number)
        solved = page.table(in_round(number, "eval/weakness"))
        body += f"<h3>Round {number} ({html.escape(str(folder.root))})</h3>"
        body += (html_table(named_arms(solved, "checkpoint").pivot(on="checkpoint", index="category",
                                                                    values="solved", sort_columns=False))
                 if solved is not None else paragraph("Not evaluated yet.", "missing"))
        body += paragraph(f"Its own report: {folder.report}")
    shown = ledger.sort("round", "problem_id").head(MAX_LEDGER_ROWS)
    body += (f"<h3>Ledger ({ledger.height} rows; ledger.parquet"
             + (f", the first {MAX_LEDGER_ROWS} here" if ledger.height > MAX_LEDGER_ROWS else "") + ")</h3>")
    return Section(title, body + html_table(shown))


MAX_LEDGER_ROWS = 300


SECTIONS: tuple[Callable[[Page], Section], ...] = (
    answer_section, overview_section, categories_section, trajectories_section, funnel_section, audit_section, tokens_section,
    judges_section, band_section, training_section, evaluation_section, benchmarks_section, mitigation_section,
    arms_section, gain_section, contamination_section, teachability_section, rounds_section,
    cotraining.cotraining_section, environment_section, timings_section,
)
# A co-training pipeline (`cotrain.only`) trains none of the SwS arms: its answer is the co-training section.
COTRAINING_SECTIONS: tuple[Callable[[Page], Section], ...] = (
    cotraining.cotraining_section, overview_section, environment_section, timings_section,
)


# Every table a section shows, each read when present.
TABLES = ("categories", "weakness", "concepts", f"{UNTARGETED}/filtered", "rated", "rated" + REJECTED, "filtered", "filtered" + REJECTED, "problems",
          *arms.training_sets(), *(arm.curve for arm in arms.ARMS), *(arm.rollouts for arm in arms.continuing()),
          "eval/problems", eval_stage.SETS, "eval/benchmarks", "eval/weakness", "ledger", "rounds_summary",
          *cotraining.TABLES)


def later_rounds_evaluated(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """Each later round's weakness mitigation, for the rounds section."""
    return tuple(in_round(number, "eval/weakness") for number in range(2, cfg.rounds.n + 1))


def input_files(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    """The files besides tables a section shows: the band filter's histogram, summary.json, and the manifests
    whose funnel rows and tokens the page gives."""
    files = [run.plots / filter_stage.PLOT_NAME, run.summary]
    files += [run.manifest(step) for step in dict.fromkeys([*funnel_steps(), *model_call_stages(cfg)])]
    return [path for path in files if path.exists()]


def report_file(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.report]


def report(context: StageContext) -> StageOutput:
    """report.html, and the plots it embeds under plots/report/."""
    page = Page(context)
    sections = COTRAINING_SECTIONS if context.cfg.cotrain.only else SECTIONS
    html_page = render_page(f"sws report: {context.run.root.name}", [build(page) for build in sections])
    ui.info(f"report: {context.run.report}")
    return StageOutput(files={context.run.report: lambda path: path.write_text(html_page), **page.plots},
                       info={"path": str(context.run.report)})


STAGE = Stage(
    "report", "Write report.html: one self-contained page with every plot and table of the run.", report,
    optional_reads=TABLES, more_optional_reads=later_rounds_evaluated,
    settings=lambda cfg, options: cfg.model_dump(mode="json"), input_files=input_files, output_files=report_file,
    section="report", example="sws report --run runs/demo")
DECLARED = (STAGE,)
