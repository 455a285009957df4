import json
import os
import signal

import polars as pl
import pytest

from sws.atomic_files import TEMP_PREFIX, atomic_write
from sws.errors import UserError
from sws.manifests import StageResult, read_manifest
from sws.run_dir import RunDir
from sws.runner import commit_stage
from sws.tables import (
    SCHEMAS,
    check_schema,
    empty_table,
    read_parquet,
    read_table,
    rejected_path,
    table_path,
    write_rejected,
    write_table,
)


def problems(n: int = 2) -> pl.DataFrame:
    return pl.DataFrame({
        "problem_id": [f"p{i}" for i in range(n)], "problem": [f"Compute {i}+1." for i in range(n)],
        "answer": [str(i + 1) for i in range(n)], "category": ["addition"] * n, "source": ["seed"] * n,
    })


# ---------------------------------------------------------------- schemas


def test_a_table_with_every_key_column_passes_and_keeps_its_extra_columns(tmp_path):
    table = problems().with_columns(pl.lit(3.0).alias("difficulty"))
    write_table(tmp_path, "problems", table)
    assert read_table(tmp_path, "problems").equals(table)


def test_a_missing_column_names_the_file_the_column_and_the_expected_type(tmp_path):
    with pytest.raises(UserError) as error:
        write_table(tmp_path, "problems", problems().drop("answer"))
    message = str(error.value)
    assert str(table_path(tmp_path, "problems")) in message
    assert "'answer'" in message and "String" in message
    assert not table_path(tmp_path, "problems").exists()


def test_a_mistyped_column_names_both_types(tmp_path):
    path = table_path(tmp_path, "rollouts")
    pl.DataFrame({"step": ["1"], "problem_id": ["p0"], "n": [8], "n_correct": [3]}).write_parquet(path)
    with pytest.raises(UserError, match=r"rollouts\.parquet: column 'step' has type String, expected Int64"):
        read_table(tmp_path, "rollouts")


def test_an_empty_table_with_untyped_columns_is_accepted():
    check_schema(pl.DataFrame({column: [] for column in SCHEMAS["problems"]}), "problems", "x")
    check_schema(empty_table("weakness"), "weakness", "x")


def test_a_missing_artifact_names_the_command_that_makes_it(tmp_path):
    with pytest.raises(UserError, match=r"run `sws identify --run .*` first"):
        read_table(tmp_path, "weakness")


def test_an_unreadable_parquet_file_is_a_user_error(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(UserError, match="not a readable Parquet file"):
        read_parquet(path)


def test_rejected_rows_need_a_reason(tmp_path):
    with pytest.raises(ValueError):
        write_rejected(tmp_path, "problems", problems())
    written = write_rejected(tmp_path, "problems", problems().with_columns(pl.lit("duplicate").alias("reject_reason")))
    assert written == rejected_path(tmp_path, "problems")
    assert pl.read_parquet(written)["reject_reason"].to_list() == ["duplicate", "duplicate"]


# ---------------------------------------------------------------- atomic writes


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "table.txt"
    path.write_text("old")

    def half_written(tmp):
        tmp.write_text("new but incomplete")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(path, half_written)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.txt"]


def test_a_write_creates_missing_folders_and_replaces_the_file(tmp_path):
    path = tmp_path / "a" / "b" / "out.txt"
    atomic_write(path, lambda tmp: tmp.write_text("one"))
    atomic_write(path, lambda tmp: tmp.write_text("two"))
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["out.txt"]


# ---------------------------------------------------------------- manifests, skip and --force


class CountingStage:
    """A stage body that copies an input file into an output and counts its runs."""

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.input = run_dir / "input.txt"
        self.output = run_dir / "output.txt"
        self.input.parent.mkdir(parents=True, exist_ok=True)
        self.input.write_text("v1")
        self.runs = 0

    def body(self) -> StageResult:
        self.runs += 1
        self.output.write_text(self.input.read_text())
        return StageResult("copy", rows={"output": 1}, info={"runs": self.runs})

    def run(self, config=None, force=False) -> StageResult:
        return commit_stage(self.run_dir, "copy", config=config or {"x": 1}, inputs=[self.input],
                         outputs=[self.output], body=self.body, force=force)


def test_a_stage_runs_once_then_is_skipped_while_nothing_changed(tmp_path):
    stage = CountingStage(tmp_path)
    first = stage.run()
    second = stage.run()
    assert (first.skipped, second.skipped, stage.runs) == (False, True, 1)
    assert second.rows == {"output": 1}


def test_force_reruns_a_current_stage(tmp_path):
    stage = CountingStage(tmp_path)
    stage.run()
    assert not stage.run(force=True).skipped
    assert stage.runs == 2


@pytest.mark.parametrize("change", ["config", "input", "missing output"])
def test_a_change_of_config_input_or_outputs_reruns_the_stage(tmp_path, change):
    stage = CountingStage(tmp_path)
    stage.run()
    config = {"x": 1}
    if change == "config":
        config = {"x": 2}
    elif change == "input":
        stage.input.write_text("v2")
    else:
        stage.output.unlink()
    assert not stage.run(config=config).skipped
    assert stage.runs == 2


def test_the_manifest_records_hash_inputs_rows_seconds_and_versions(tmp_path):
    stage = CountingStage(tmp_path)
    stage.run()
    manifest = json.loads(RunDir(tmp_path).manifest("copy").read_text())
    assert set(manifest) >= {"config_hash", "inputs", "outputs", "rows", "seconds", "versions", "info"}
    assert list(manifest["inputs"]) == ["input.txt"]
    assert manifest["rows"] == {"output": 1}
    assert "polars" in manifest["versions"]


def test_a_failing_stage_writes_no_manifest(tmp_path):
    def broken() -> StageResult:
        raise UserError("bad input")

    with pytest.raises(UserError):
        commit_stage(tmp_path, "broken", config={}, inputs=[], outputs=[tmp_path / "out"], body=broken)
    assert read_manifest(tmp_path, "broken") is None


def test_a_corrupt_manifest_means_the_stage_is_not_done(tmp_path):
    stage = CountingStage(tmp_path)
    stage.run()
    RunDir(tmp_path).manifest("copy").write_text("{not json")
    assert not stage.run().skipped


# ---------------------------------------------------------------- outputs as the stage wrote them


class TableStage:
    """A stage writing two tables through the artifacts module, as the real stages do."""

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.runs = 0
        self.outputs = [table_path(run_dir, "problems"), rejected_path(run_dir, "problems")]

    def body(self, during=None) -> StageResult:
        self.runs += 1
        write_table(self.run_dir, "problems", problems(self.runs + 1))
        if during is not None:
            during()
        write_rejected(self.run_dir, "problems", problems(1).with_columns(pl.lit("dup").alias("reject_reason")))
        return StageResult("tables")

    def run(self, force=False, during=None) -> StageResult:
        return commit_stage(self.run_dir, "tables", config={}, inputs=[], outputs=self.outputs,
                         body=lambda: self.body(during), force=force)


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def garbage(path):
    path.write_bytes(b"garbage" * 10)


def replace_with_other_rows(path):
    problems(7).write_parquet(path)


def delete(path):
    path.unlink()


@pytest.mark.parametrize("damage", [truncate, garbage, replace_with_other_rows, delete])
@pytest.mark.parametrize("which", [0, 1])
def test_a_damaged_output_reruns_the_stage_and_says_which_file(tmp_path, damage, which, capsys):
    stage = TableStage(tmp_path)
    stage.run()
    damage(stage.outputs[which])
    assert not stage.run().skipped
    assert stage.outputs[which].name in capsys.readouterr().err
    assert stage.run().skipped
    assert read_table(tmp_path, "problems").equals(problems(3))


def test_outputs_change_together_after_the_body_and_the_manifest_comes_last(tmp_path):
    stage = TableStage(tmp_path)
    stage.run()
    before = read_table(tmp_path, "problems")
    seen = {}

    def while_running():
        seen["problems"] = read_table(tmp_path, "problems")
        seen["manifest"] = read_manifest(tmp_path, "tables")

    stage.run(force=True, during=while_running)
    assert seen["problems"].equals(before)
    assert seen["manifest"] is None
    assert read_table(tmp_path, "problems").equals(problems(3))


def test_a_failing_body_leaves_the_old_outputs_and_their_manifest(tmp_path):
    stage = TableStage(tmp_path)
    stage.run()

    def fail():
        raise UserError("bad input")

    with pytest.raises(UserError):
        stage.run(force=True, during=fail)
    assert read_table(tmp_path, "problems").equals(problems(2))
    assert stage.run().skipped
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_temporaries_of_a_killed_run_are_swept_by_the_next(tmp_path):
    leftover = tmp_path / f"{TEMP_PREFIX}{table_path(tmp_path, 'problems').name}.abc123.tmp"
    leftover.write_bytes(b"half")
    TableStage(tmp_path).run()
    assert not leftover.exists()


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_artifacts_are_written_with_the_process_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        write_table(tmp_path, "problems", problems())
    finally:
        os.umask(previous)
    assert table_path(tmp_path, "problems").stat().st_mode & 0o777 == 0o666 & ~umask


def test_ctrl_c_inside_a_deferred_block_arrives_when_it_ends():
    from sws.atomic_files import interrupts_deferred

    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            with interrupts_deferred():  # nested: still held back
                done.append("inner")
            done.append("outer")
    assert done == ["inner", "outer"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---------------------------------------------------------------- planted symbolic links


def test_a_stage_replaces_planted_links_and_never_writes_their_targets(tmp_path):
    """A shared run directory may hold links planted by someone else: every output, rejected table, manifest
    and config write replaces the link itself, and the file it pointed at is left as it was."""
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    run_dir.mkdir()
    outside.mkdir()
    stage = TableStage(run_dir)
    layout = RunDir(run_dir)
    targets = {}
    for path in [*stage.outputs, layout.manifest("tables"), layout.config]:
        target = outside / path.name
        target.write_text("precious")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
        targets[path] = target
    stage.run()
    from sws.config import PipelineConfig, save_run_config

    save_run_config(run_dir, PipelineConfig())
    for path, target in targets.items():
        assert target.read_text() == "precious"
        assert path.is_file() and not path.is_symlink()
    assert read_table(run_dir, "problems").height == 2


def test_a_folder_linked_out_of_the_run_is_refused_before_the_stage_runs(tmp_path):
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    run_dir.mkdir()
    outside.mkdir()
    (run_dir / "manifests").symlink_to(outside)
    stage = TableStage(run_dir)
    with pytest.raises(UserError, match=r"manifests: a symbolic link out of the run directory"):
        stage.run()
    assert list(outside.iterdir()) == [] and stage.runs == 0


@pytest.mark.parametrize("content", [b"[1, 2]", b'"done"', b"\xff\xfe{}", b'{"stage": "copy"}',
                                     b'{"stage": "copy", "config_hash": "x", "inputs": [], "outputs": {}, '
                                     b'"rows": {}, "info": {}, "seconds": 1}',
                                     b'{"stage": "copy", "config_hash": "x", "inputs": {}, "outputs": {}, '
                                     b'"rows": {}, "info": "funnel", "seconds": 1}'])
def test_a_manifest_of_the_wrong_shape_or_not_utf8_means_the_stage_is_not_done(tmp_path, content, capsys):
    stage = CountingStage(tmp_path)
    stage.run()
    RunDir(tmp_path).manifest("copy").write_bytes(content)
    assert read_manifest(tmp_path, "copy") is None
    assert "not a manifest sws wrote" in capsys.readouterr().err
    assert not stage.run().skipped and stage.runs == 2
    assert stage.run().skipped
