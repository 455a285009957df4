"""The run directory: declared Parquet schemas, atomic writes, rejected-row sidecars and stage manifests.

Every stage reads its inputs and writes its outputs through this module, so a missing or mistyped column is
caught at the boundary with one line that names the file, the column and what was expected.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from sws import __version__, arms, tokens, ui
from sws.errors import UserError
from sws.run_dir import LATER_ROUNDS, RunDir
from sws.stage import producer_of

STR = pl.Utf8
INT = pl.Int64
FLOAT = pl.Float64
BOOL = pl.Boolean
STR_LIST = pl.List(pl.Utf8)
FLOAT_LIST = pl.List(pl.Float64)

ROLLOUT_COLUMNS: dict[str, pl.DataType] = {"step": INT, "problem_id": STR, "n": INT, "n_correct": INT}
EVAL_PROBLEMS: dict[str, pl.DataType] = {
    "checkpoint": STR, "eval_set": STR, "problem_id": STR, "category": STR,
    "greedy_correct": BOOL, "n": INT, "n_correct": INT, "k": INT, "problem": STR,
}

# Key columns of each artifact (DESIGN §3). Artifacts may carry more columns; these must be present and typed.
SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "problems": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    "rollouts": ROLLOUT_COLUMNS,
    "weakness": {
        "problem_id": STR, "category": STR, "accs": FLOAT_LIST, "n_record": INT,
        "max_acc": FLOAT, "slope": FLOAT, "weak": BOOL,
    },
    "categories": {"category": STR, "n_problems": INT, "n_weak": INT, "fail_ratio": FLOAT, "share": FLOAT},
    "concepts": {"problem_id": STR, "category": STR, "concepts": STR_LIST},
    "concept_sets": {"set_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "instance": INT},
    "synthetic": {"syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR},
    "rated": {"syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR, "verdicts": STR},
    "labeled": {
        "syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR,
        "answer": STR, "consistency": FLOAT,
    },
    # The labeled problems the audit kept (sws.stages.audit), with its answers.
    "audited": {
        "syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR,
        "answer": STR, "consistency": FLOAT, "audited": BOOL,
    },
    "scored": {
        "syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR, "answer": STR,
        "n": INT, "n_correct": INT, "accuracy": FLOAT,
    },
    "filtered": {
        "syn_id": STR, "category": STR, "problem": STR, "answer": STR,
        "n": INT, "n_correct": INT, "accuracy": FLOAT, "round": INT,
    },
    "selected": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR,
                 "distance": FLOAT, "nearest_weak_id": STR},
    "augmented": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    # The selected arm's training set (`select.arm`): seed ∪ selected, mixed as augmented is.
    "selected_mix": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    # Each arm's curve and rollout log (the initial arm's is `rollouts`, what identify reads).
    **{arm.curve: {"step": INT, "reward": FLOAT, "reward_std": FLOAT, "loss": FLOAT} for arm in arms.ARMS},
    **{arm.rollouts: ROLLOUT_COLUMNS for arm in arms.ARMS},
    # What `sws eval` samples every checkpoint on (held-out sets, the weak problems, the seed set), then per
    # checkpoint its answers (`eval/parts/<checkpoint>`) and all of them together.
    "eval/sets": {"eval_set": STR, "problem_id": STR, "problem": STR, "answer": STR, "category": STR, "k": INT,
                  "benchmark": BOOL, "held_out": BOOL},
    **{f"eval/parts/{checkpoint}": EVAL_PROBLEMS for checkpoint in arms.CHECKPOINTS},
    "eval/problems": EVAL_PROBLEMS,
    "eval/benchmarks": {
        "checkpoint": STR, "eval_set": STR, "category": STR, "n": INT, "pass1": FLOAT, "avg_k": FLOAT,
    },
    "eval/weakness": {"checkpoint": STR, "category": STR, "n_weak": INT, "n_solved": INT, "solved": FLOAT,
                      "avg_k": FLOAT},
    # `sws run --rounds N` (sws.stages.rounds).
    "prior_weak": {"problem_id": STR},
    "ledger": {"round": INT, "problem_id": STR, "weak": BOOL, "max_acc": FLOAT, "slope": FLOAT, "accuracy": FLOAT,
               "status": STR},
    "rounds_summary": {"round": INT, "n_weak": INT, "n_kept": INT},
    "reference_rated": {"syn_id": STR, "verdicts": STR},
}

# Difficulty-adaptive regeneration (`sws filter` with synthesize.adapt_rounds): round r >= 1 writes its own
# concept_sets, synthetic, rated, labeled and scored tables, and manifests of its steps, under adapt/round-<r>/.
ADAPT_DIR = "adapt"
ROUND_PREFIX = re.compile(rf"^{ADAPT_DIR}/round-\d+/")
# A later round of `sws run --rounds N` is a run folder of its own, `rounds/<r>/`; from the run, its tables are
# named `rounds/<r>/<table>` (`sws.run_dir.in_round`).
LATER_ROUND_PREFIX = re.compile(rf"^{LATER_ROUNDS}/\d+/")


def round_name(name: str, adapt_round: int) -> str:
    """The table or stage `name` of adaptive round `adapt_round` (round 0 is the original synthesis)."""
    return name if adapt_round == 0 else f"{ADAPT_DIR}/round-{adapt_round}/{name}"


def artifact_kind(name: str) -> str:
    """The artifact a (possibly per-round) table name holds: adapt/round-2/labeled -> labeled,
    rounds/2/weakness -> weakness."""
    return ROUND_PREFIX.sub("", LATER_ROUND_PREFIX.sub("", name))


def table_path(run_dir: Path, name: str) -> Path:
    return RunDir(run_dir).table(name)


def rejected_path(run_dir: Path, name: str) -> Path:
    return RunDir(run_dir).rejected(name)


def check_schema(df: pl.DataFrame, name: str, source: Path | str) -> None:
    """Raise UserError on the first missing or mistyped key column of artifact `name`."""
    for column, dtype in SCHEMAS[artifact_kind(name)].items():
        if column not in df.columns:
            raise UserError(f"{source}: missing column '{column}' (expected {dtype} in a '{name}' table)")
        if df.schema[column] != dtype and not (df.height == 0 and df.schema[column] == pl.Null):
            raise UserError(f"{source}: column '{column}' has type {df.schema[column]}, expected {dtype}")


def empty_table(name: str, extra: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
    return pl.DataFrame(schema={**SCHEMAS[artifact_kind(name)], **(extra or {})})


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same directory, fsync it, and rename it into place.

    Inside a running stage, a declared output is staged instead: `run_stage` renames it into place together
    with the stage's other outputs once the body has finished, then writes the manifest.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = ""
    try:
        with interrupts_deferred():  # a Ctrl-C between creating the file and owning it would leave it behind
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
            os.close(fd)
        try:
            write(Path(tmp))
        except Exception as exc:
            wrapped = None if isinstance(exc, OSError) else _os_error_inside(exc, path)
            if wrapped is None:
                raise
            raise wrapped from exc
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync(tmp)
        with interrupts_deferred():
            staging = _stage_of(path)
            if staging is not None:
                staging.stage(path, Path(tmp))
            else:
                os.replace(tmp, path)
                _fsync(path.parent)
            tmp = ""
    finally:
        with interrupts_deferred():
            if tmp and os.path.exists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) until the block is done, so that it never lands between two steps that
    must happen together, such as creating a temporary file and taking charge of it. Nests; main thread only."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is _defer:
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, _defer)
    _deferred.append(received)
    try:
        yield
    finally:
        _deferred.pop()
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)  # delivered now, to the handler that was there before


_deferred: list[list[int]] = []


def _defer(signum: int, frame: Any) -> None:
    _deferred[-1].append(signum)


TEMP_SUFFIX = ".tmp"
# Writers with a Rust core (polars) report an operating-system error inside their own exception type.
RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _os_error_inside(exc: Exception, path: Path) -> OSError | None:
    """The OSError (full disk, ...) that a writer library wrapped in its own exception, if it did."""
    found = RUST_OS_ERROR.search(str(exc))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(path))


def _umask() -> int:
    """The process umask (mkstemp creates files 0600 whatever it is); os.umask can only swap it, so swap back."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: Path | str) -> None:
    """Flush a file's data, or a directory's entries (after a rename), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _OutputSet:
    """The declared file outputs of the running stage, and the staged temporary file written for each so far."""

    declared: set[Path]
    staged: dict[Path, Path] = field(default_factory=dict)

    def stage(self, final: Path, temporary: Path) -> None:
        previous = self.staged.pop(_absolute(final), None)
        if previous is not None:
            previous.unlink(missing_ok=True)
        self.staged[_absolute(final)] = temporary

    def commit(self) -> None:
        for final, temporary in self.staged.items():
            os.replace(temporary, final)
        for folder in {final.parent for final in self.staged}:
            _fsync(folder)
        self.staged.clear()

    def discard(self) -> None:
        for temporary in self.staged.values():
            temporary.unlink(missing_ok=True)
        self.staged.clear()


_running: list[_OutputSet] = []


def _absolute(path: Path | str) -> Path:
    """The path itself, made absolute without following links: a write replaces a planted symlink, never its
    target (`os.replace` renames over the link)."""
    return Path(os.path.abspath(path))


def _stage_of(path: Path) -> _OutputSet | None:
    if _running and _absolute(path) in _running[-1].declared:
        return _running[-1]
    return None


def write_parquet(df: pl.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: df.write_parquet(tmp))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def json_text(obj: Any) -> str:
    """`obj` as sws writes JSON files (manifests, summary.json): indented, keys sorted."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json_text(obj))


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as JSON Lines, one object a line."""
    write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def write_table(run_dir: Path, name: str, df: pl.DataFrame) -> Path:
    """Validate and atomically write artifact `name` into the run directory."""
    path = table_path(run_dir, name)
    check_schema(df, name, path)
    write_parquet(df, path)
    return path


def write_rejected(run_dir: Path, name: str, df: pl.DataFrame) -> Path:
    """Write the rows a filtering stage dropped, each with its `reject_reason`."""
    if "reject_reason" not in df.columns:
        raise ValueError("rejected rows need a reject_reason column")
    path = rejected_path(run_dir, name)
    write_parquet(df, path)
    return path


def read_parquet(path: Path) -> pl.DataFrame:
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: file not found")
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path}: not a readable Parquet file ({type(exc).__name__}); rewrite it") from exc


def read_records(path: Path) -> pl.DataFrame:
    """A JSON list, JSONL or Parquet file as a table; a missing or unreadable file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    if path.suffix == ".parquet":
        return read_parquet(path)
    try:
        if path.suffix == ".jsonl":
            return pl.read_ndjson(path, infer_schema_length=None)
        return pl.read_json(path, infer_schema_length=None)
    except Exception as exc:  # polars raises several types for malformed JSON
        raise UserError(f"{path}: not a readable {path.suffix or 'JSON'} file ({type(exc).__name__}); fix or "
                        "re-export it (a JSON list of objects, JSONL or Parquet)") from exc


def read_table(run_dir: Path, name: str) -> pl.DataFrame:
    """Read and validate artifact `name`; a missing file names the command that makes it."""
    path = table_path(run_dir, name)
    if not path.exists():
        producer = ("sws filter" if ROUND_PREFIX.match(name) else "sws run PIPELINE --rounds N"
                    if LATER_ROUND_PREFIX.match(name) else producer_of(name))
        raise UserError(f"{path}: not found; run `{producer} --run {run_dir}` first")
    df = read_parquet(path)
    check_schema(df, name, path)
    return df


# ---------------------------------------------------------------- manifests


def fingerprint(path: Path) -> str:
    """Content hash of a file; for a directory, of its files' relative names, sizes and modification times."""
    path = Path(path)
    if not path.exists():
        return "missing"
    digest = hashlib.sha256()
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            stat = child.stat()
            digest.update(f"{child.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    else:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def config_hash(config: Any) -> str:
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def package_versions() -> dict[str, str]:
    versions = {"sws": __version__}  # sws's own, whatever its distribution is named (sws-rlvr) or if a checkout
    for package in ("torch", "transformers", "trl", "vllm", "sentence-transformers", "math-verify", "polars"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str:
    """The CPU's model name: numbers from float kernels can differ between CPU models (vector width, BLAS paths)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Environment variables that choose torch's and MKL's CPU kernels. Unset, each takes the widest vector
# instructions of the CPU, so the same seed trains other weights on an AVX2 and on an AVX-512 machine.
KERNEL_SETTINGS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS")


def cpu_kernels() -> str | None:
    """The vector instruction set torch's CPU kernels use in this process (e.g. AVX2, AVX512), if torch is installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch.backends.cpu.get_cpu_capability()


def environment() -> dict[str, Any]:
    """What a run's numbers depend on besides its config and seed: package versions, CPU and its kernels, Python."""
    return {"versions": package_versions(), "cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "cpu_kernels": cpu_kernels(),
            "kernel_settings": {name: os.environ[name] for name in KERNEL_SETTINGS if name in os.environ},
            "python": platform.python_version(), "platform": platform.platform()}




# A manifest's fields and their types, as run_stage writes them.
MANIFEST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "stage": str, "config_hash": str, "inputs": dict, "outputs": dict, "rows": dict, "info": dict,
    "seconds": (int, float),
}


def read_manifest(run_dir: Path, stage: str, partial: bool = False) -> dict[str, Any] | None:
    """The stage's manifest, or None when there is none or it is not one sws wrote (cut short, edited, another
    file): then the stage counts as not run, and runs again. A partial manifest (a step stopped at a spending
    cap) counts as not run too, unless `partial` asks for it."""
    path = RunDir(run_dir).manifest(stage)
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        ui.info(f"{path}: not a manifest sws wrote ({type(exc).__name__}); the stage counts as not run")
        return None
    wrong = next((name for name, kind in MANIFEST_FIELDS.items()
                  if not isinstance(manifest, dict) or not isinstance(manifest.get(name), kind)), None)
    if wrong is not None:
        what = f"field '{wrong}' missing or mistyped" if isinstance(manifest, dict) else "not a JSON object"
        ui.info(f"{path}: not a manifest sws wrote ({what}); the stage counts as not run")
        return None
    return manifest if partial or not manifest.get("partial") else None


@dataclass
class StageResult:
    """What a stage did: rows written per output, whether it was skipped, stage-specific info (e.g. a funnel),
    the seconds and the model tokens per role (`sws.tokens`) its outputs took (when skipped: when they were made)."""

    stage: str
    rows: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    seconds: float = 0.0
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)


def fingerprints(run_dir: Path, paths: list[Path]) -> dict[str, str]:
    """`fingerprint` of each path, keyed by its path relative to the run (absolute when outside it)."""
    return {str(Path(p).relative_to(run_dir) if Path(p).is_relative_to(run_dir) else p): fingerprint(p)
            for p in paths}


def stale_reason(previous: dict[str, Any] | None, wanted_hash: str, inputs_fp: dict[str, str],
                 outputs_fp: dict[str, str]) -> str | None:
    """Why a stage with manifest `previous` must run (None: it is current, every output as it wrote it)."""
    if previous is None:
        return "not run yet"
    if previous.get("config_hash") != wanted_hash:
        return "its settings changed"
    recorded_inputs = previous.get("inputs", {})
    changed = [name for name in sorted({*inputs_fp, *recorded_inputs}) if inputs_fp.get(name) != recorded_inputs.get(name)]
    if changed:
        return f"input {changed[0]} changed"
    recorded_outputs = previous.get("outputs", {})
    for name, now in outputs_fp.items():
        if now == "missing":
            return f"output {name} is missing"
        if recorded_outputs.get(name) != now:
            return f"output {name} is not the file this stage wrote (changed, replaced or damaged)"
    return None


def current_manifest(run_dir: Path, stage: str, config: Any, inputs: list[Path],
                     outputs: list[Path]) -> dict[str, Any] | None:
    """The stage's manifest if it matches this config, these inputs and the outputs as it wrote them, else None."""
    previous = read_manifest(run_dir, stage)
    reason = stale_reason(previous, config_hash(config), fingerprints(run_dir, inputs),
                          fingerprints(run_dir, outputs))
    return previous if reason is None else None


def skipped_result(stage: str, manifest: dict[str, Any]) -> StageResult:
    """The result a current manifest records, for a stage skipped now; its tokens count towards an active cap."""
    used = manifest.get("tokens") or {}
    tokens.record_done(used)
    return StageResult(stage, rows=manifest.get("rows", {}), info=manifest.get("info", {}), skipped=True,
                       seconds=manifest.get("seconds", 0.0), tokens=used)


def run_stage(
    run_dir: Path,
    stage: str,
    *,
    config: Any,
    inputs: list[Path],
    outputs: list[Path],
    body: Callable[[], StageResult],
    force: bool = False,
) -> StageResult:
    """Run `body` unless the stage's manifest matches its config, its inputs and its outputs' fingerprints.

    The outputs are committed as a set: the manifest is removed before the body runs, the body's writes to
    declared output files are staged, and only after it returns are they renamed into place and the manifest
    written, each with fsync. A kill at any instant leaves the old outputs or the new ones, and a manifest
    only beside the set it describes. (Folder outputs, such as a model, are written in place by their
    producer; the missing manifest marks them unfinished until the stage completes.)
    """
    run_dir = Path(run_dir)
    layout = RunDir(run_dir)
    for path in [*outputs, layout.manifest(stage)]:  # before anything is removed or written
        layout.check_inside(Path(path))
    wanted_hash = config_hash(config)
    inputs_fp = fingerprints(run_dir, inputs)
    previous = read_manifest(run_dir, stage)
    reason = stale_reason(previous, wanted_hash, inputs_fp, fingerprints(run_dir, outputs))
    if reason is None and not force:
        ui.info(f"{stage}: up to date, skipped ({RunDir(run_dir).manifest(stage)} matches; --force reruns it)")
        return skipped_result(stage, previous)
    if reason is not None and reason.startswith("output"):
        ui.info(f"{stage}: {reason}; running it again")
    if previous is None and (read_manifest(run_dir, stage, partial=True) or {}).get("partial"):
        ui.info(f"{stage}: stopped at a spending cap before; continuing from its finished shards")
    _remove_manifest(run_dir, stage)
    _remove_leftover_temporaries(outputs)
    started = time.perf_counter()
    declared = _OutputSet({_absolute(p) for p in outputs if not Path(p).is_dir()})
    _running.append(declared)
    try:
        with tokens.ledger() as used_tokens:
            result = body()
    except tokens.CapReached as stop:
        with interrupts_deferred():
            declared.discard()
            write_json(layout.manifest(stage), {
                "stage": stage, "partial": True, "config_hash": wanted_hash, "inputs": inputs_fp, "outputs": {},
                "rows": {}, "info": {"stopped_at": stop.setting}, "seconds": round(time.perf_counter() - started, 3),
                **({"tokens": used_tokens} if used_tokens else {}), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            })
        raise
    except BaseException:
        with interrupts_deferred():
            declared.discard()
            _restore_if_untouched(run_dir, stage, previous, outputs)
        raise
    finally:
        _running.pop()
    with interrupts_deferred():
        declared.commit()
    missing = [str(p) for p in outputs if not Path(p).exists()]
    if missing:
        raise RuntimeError(f"stage {stage} finished without writing its outputs {missing}")
    result.seconds, result.tokens = round(time.perf_counter() - started, 3), used_tokens
    write_json(
        RunDir(run_dir).manifest(stage),
        {
            "stage": stage,
            "config_hash": wanted_hash,
            "inputs": inputs_fp,
            "outputs": fingerprints(run_dir, outputs),
            "rows": result.rows,
            "info": result.info,
            "seconds": result.seconds,
            **({"tokens": used_tokens} if used_tokens else {}),
            "versions": package_versions(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    )
    return result


def _remove_manifest(run_dir: Path, stage: str) -> None:
    path = RunDir(run_dir).manifest(stage)
    if path.exists():
        path.unlink()
        _fsync(path.parent)


def _restore_if_untouched(run_dir: Path, stage: str, previous: dict[str, Any] | None, outputs: list[Path]) -> None:
    """After a failed body: put back the old manifest if the outputs are still the ones it describes.

    Staged writes never reach the outputs, so a body that fails (bad input, say) normally leaves the old set,
    and the old manifest is still true of it. Only a folder output written in place can differ.
    """
    if previous is not None and previous.get("outputs") == fingerprints(run_dir, outputs):
        write_json(RunDir(run_dir).manifest(stage), previous)


def _remove_leftover_temporaries(outputs: list[Path]) -> None:
    """Temporary files of these outputs left by a killed earlier run (one writer per run: none is in use)."""
    for output in map(Path, outputs):
        if output.parent.is_dir():
            for leftover in output.parent.glob(f".{output.name}.*{TEMP_SUFFIX}"):
                leftover.unlink(missing_ok=True)
