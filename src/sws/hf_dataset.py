"""`sws export hf`: a run's problem sets as a Hugging Face dataset folder, with a dataset card.

The folder holds one Parquet file per config (`<config>/train-00000-of-00001.parquet`): `augmented` (seed set and
new problems, the training set; the default config), `synthetic` (the synthetic problems that passed every
filter, `filtered.parquet`, with their labels, consistency and policy accuracy) and `selected` (the pool problems
`sws select` chose), each when the run has it. `README.md` is the dataset card: a YAML header that
`datasets.load_dataset(folder)` reads (license, task categories, configs with their data files, features), then
the provenance (the model of each role, sws version, config hash, seed), the synthesis funnel, the
decontamination references and what they removed, and a loading snippet. `--push REPO` uploads the folder with
huggingface_hub; without a token it is one error line. The folder is empty or one this command wrote
(`sws.hf_folder`), so an upload holds the export and nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import yaml

from sws import __version__, ui
from sws.atomic_files import write_parquet, write_text
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.fingerprints import config_hash
from sws.funnel import FunnelRow, read_funnel
from sws.hf_folder import MARKER, check_folder, claim_folder
from sws.manifests import read_manifest
from sws.stage import synthesis_steps
from sws.tables import read_parquet, rejected_path, table_path

# config name -> the run's table, in the order the card lists them; the first present one is the default.
CONFIG_TABLES = {"augmented": "augmented", "synthetic": "filtered", "selected": "selected"}
CONFIG_SUMMARIES = {
    "augmented": "the training set: seed problems and the new ones (`source` says which)",
    "synthetic": "the synthetic problems that passed every filter, with label consistency and policy accuracy",
    "selected": "pool problems chosen for the weaknesses (`sws select`), nearest to a weak problem first",
}
DATA_FILE = "train-00000-of-00001.parquet"
ROLE_NAMES = ("extractor", "generator", "judges", "labeler", "auditor", "policy")


def data_file(config: str) -> str:
    return f"{config}/{DATA_FILE}"


# Scalar polars types (by class, so that every width and alias maps) and their Hugging Face `Value` dtype.
SCALAR_FEATURES: dict[type[pl.DataType], str] = {
    pl.String: "string", pl.Boolean: "bool", pl.Binary: "binary", pl.Date: "date32", pl.Null: "null",
    pl.Int8: "int8", pl.Int16: "int16", pl.Int32: "int32", pl.Int64: "int64",
    pl.UInt8: "uint8", pl.UInt16: "uint16", pl.UInt32: "uint32", pl.UInt64: "uint64",
    pl.Float32: "float32", pl.Float64: "float64",
}


class UnmappedType(ValueError):
    """A polars type with no Hugging Face feature."""


def feature(dtype: pl.DataType) -> dict[str, Any]:
    """A polars type as a Hugging Face `features` entry (without the name)."""
    if isinstance(dtype, pl.List | pl.Array):
        inner = feature(dtype.inner)
        return {"sequence": inner["dtype"]} if "dtype" in inner else {"sequence": inner}
    if isinstance(dtype, pl.Struct):
        return {"struct": [{"name": f.name, **feature(f.dtype)} for f in dtype.fields]}
    if isinstance(dtype, pl.Datetime):
        zone = f", tz={dtype.time_zone}" if dtype.time_zone else ""
        return {"dtype": f"timestamp[{dtype.time_unit}{zone}]"}
    if isinstance(dtype, pl.Duration):
        return {"dtype": f"duration[{dtype.time_unit}]"}
    name = SCALAR_FEATURES.get(dtype.base_type())
    if name is None:
        raise UnmappedType(str(dtype))
    return {"dtype": name}


def check_features(table: pl.DataFrame, path: Path) -> None:
    """One line naming the file and column whose type `feature` cannot map."""
    for column, dtype in table.schema.items():
        try:
            feature(dtype)
        except UnmappedType:
            raise UserError(f"{path}: column '{column}' has polars type {dtype}, which has no Hugging Face "
                            "feature; cast or drop that column, then rerun `sws export hf`") from None


def exportable(df: pl.DataFrame) -> pl.DataFrame:
    """Columns that hold only nulls get a string type (polars' Null type has no Hugging Face feature)."""
    return df.with_columns([pl.col(name).cast(pl.Utf8) for name, dtype in df.schema.items() if dtype == pl.Null])


def card_header(tables: dict[str, pl.DataFrame], license_id: str) -> dict[str, Any]:
    return {
        "license": license_id,
        "task_categories": ["text-generation", "question-answering"],
        "language": ["en"],
        "tags": ["math", "rlvr", "synthetic", "sws"],
        "pretty_name": "sws problem sets",
        "configs": [{"config_name": name, "data_files": [{"split": "train", "path": data_file(name)}],
                     **({"default": True} if index == 0 else {})} for index, name in enumerate(tables)],
        "dataset_info": [{"config_name": name,
                          "features": [{"name": column, **feature(dtype)} for column, dtype in table.schema.items()],
                          "splits": [{"name": "train", "num_bytes": int(table.estimated_size()),
                                      "num_examples": table.height}]}
                         for name, table in tables.items()],
    }


def provenance(cfg: PipelineConfig) -> list[str]:
    lines = []
    for role in ROLE_NAMES:
        value = getattr(cfg.roles, role)
        for engine in value if isinstance(value, list) else [value]:
            if engine is not None:
                model = f"`{engine.model}`" if engine.model else "the run's initial checkpoint"
                lines.append(f"- {role}: {model} ({engine.engine} engine)")
    return [*lines, f"- sws version: {__version__}", f"- config hash: `{config_hash(cfg)}`", f"- seed: {cfg.seed}",
            f"- world: {cfg.world}"]


def funnel_lines(run_dir: Path) -> list[str]:
    rows: list[FunnelRow] = read_funnel(run_dir, [stage.name for stage in synthesis_steps()])
    filter_manifest = read_manifest(run_dir, "filter")
    if not rows:
        return ["No synthesis funnel was recorded in this run."]
    lines = ["| step | in | kept | rejected by reason |", "|---|---:|---:|---|"]
    for row in rows:
        reasons = ", ".join(f"{reason} {count}" for reason, count in row.rejected.items()) or "-"
        lines.append(f"| {row.step} | {row.rows_in} | {row.kept} | {reasons} |")
    if filter_manifest is not None and "band" in filter_manifest.get("info", {}):
        low, high = filter_manifest["info"]["band"]
        kept, rejected = (filter_manifest.get("rows", {}).get(name, 0) for name in ("filtered", "filtered.rejected"))
        lines.append(f"\nThe difficulty filter kept {kept} of {kept + rejected} problems (every adaptive round's), "
                     f"those the initial policy solves with accuracy in [{low:g}, {high:g}].")
    return lines


def decontamination_lines(cfg: PipelineConfig, run_dir: Path) -> list[str]:
    references = cfg.synthesize.reference_files
    removed: dict[str, int] = {}
    sidecar = rejected_path(run_dir, "synthetic")
    if sidecar.exists():
        rejected = read_parquet(sidecar)
        if "reject_detail" in rejected.columns:
            details = rejected.filter(pl.col("reject_reason") == "near_duplicate")["reject_detail"].drop_nulls()
            for reference in references:
                removed[reference] = int(details.str.contains(f"reference:{reference}", literal=True).sum())
    if not references:
        return ["No benchmark was named in `synthesize.reference_files`; generated problems were checked for "
                "near-duplicates of the seed set only."]
    return ["Generated problems too close to a problem of these files (or of the seed set) were removed:", "",
            *(f"- `{Path(reference).name}`: {removed.get(reference, 0)} removed" for reference in references)]


def card(cfg: PipelineConfig, run_dir: Path, tables: dict[str, pl.DataFrame], license_id: str, repo: str | None
         ) -> str:
    header = yaml.safe_dump(card_header(tables, license_id), sort_keys=False)
    name = repo or "path/to/this/folder"
    configs = "\n".join(f"- `{config}` ({table.height} rows): {CONFIG_SUMMARIES[config]}"
                        for config, table in tables.items())
    other = next((config for config in tables if config != next(iter(tables))), None)
    snippet = [f'train = load_dataset("{name}", split="train")']
    if other:
        snippet.append(f'{other} = load_dataset("{name}", "{other}", split="train")')
    return "\n".join([
        f"---\n{header}---", "", "# sws problem sets", "",
        "Problem sets written by sws, self-aware weakness-driven problem synthesis "
        "for reinforcement learning with verifiable rewards: problems aimed at the weaknesses a policy showed in "
        "a preliminary RL run, each with a reference answer.", "", "## Configs", "", configs, "",
        "## Provenance", "", *provenance(cfg), "", "## Synthesis funnel", "", *funnel_lines(run_dir), "",
        "## Decontamination", "", *decontamination_lines(cfg, run_dir), "", "## Loading", "", "```python",
        "from datasets import load_dataset", "", *snippet, "```", "",
    ])


def export(cfg: PipelineConfig, run_dir: Path, out: Path, license_id: str = "other", push: str | None = None
           ) -> dict[str, int]:
    """Write the dataset folder `out`; with `push`, upload it to that dataset repo. Returns rows per config."""
    run_dir, out = Path(run_dir), Path(out)
    tables = {config: exportable(read_parquet(table_path(run_dir, table)))
              for config, table in CONFIG_TABLES.items() if table_path(run_dir, table).exists()}
    for config, table in tables.items():
        check_features(table, table_path(run_dir, CONFIG_TABLES[config]))
    if not tables:
        raise UserError(f"{run_dir}: no problem set to export (augmented, filtered or selected.parquet); run "
                        f"`sws mix --run {run_dir}` first")
    own_files = {"README.md", *(data_file(config) for config in CONFIG_TABLES)}
    check_folder(out, own_files)
    if push is not None:
        token = hub_token()
    claim_folder(out, own_files, {"README.md", *(data_file(config) for config in tables)})
    for config, table in tables.items():
        write_parquet(table, out / data_file(config))
    write_text(out / "README.md", card(cfg, run_dir, tables, license_id, push))
    ui.info(f"export hf: {', '.join(f'{config} {table.height} rows' for config, table in tables.items())} -> {out}")
    if push is not None:
        upload(out, push, token)
    return {config: table.height for config, table in tables.items()}


def hub_token() -> str:
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise UserError("--push: no Hugging Face token; set HF_TOKEN or run `hf auth login`, or leave out --push")
    return token


def upload(folder: Path, repo: str, token: str) -> None:
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        api.upload_folder(repo_id=repo, folder_path=str(folder), repo_type="dataset", ignore_patterns=[MARKER])
    except Exception as exc:  # network, auth and hub errors all end the same way: one line, the folder kept
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--push {repo}: upload failed ({first_line}); the dataset is in {folder}") from None
    ui.info(f"export hf: uploaded {folder} to https://huggingface.co/datasets/{repo}")
