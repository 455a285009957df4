import json
import multiprocessing
import os
import time

import pytest
from typer.testing import CliRunner

from sws.atomic_files import TEMP_PREFIX
from sws.cli import app
from sws.errors import UserError
from sws.run_dir import RunDir
from sws.run_lock import run_lock


def test_a_second_holder_fails_at_once_naming_the_first(tmp_path):
    with run_lock(tmp_path, "sws identify --run x"):
        started = time.perf_counter()
        with pytest.raises(UserError, match=rf"in use by pid {os.getpid()} .*sws identify --run x"):
            with run_lock(tmp_path):
                pass
        assert time.perf_counter() - started < 1


def test_a_command_on_a_locked_run_is_one_line_and_exit_2(tmp_path):
    with run_lock(tmp_path, "sws train initial"):
        result = CliRunner().invoke(app, ["identify", "--run", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: ") and "sws train initial" in result.stderr


def test_a_stale_lock_of_a_dead_process_is_taken_over_and_said(tmp_path, capsys):
    RunDir(tmp_path).lock.write_text(json.dumps({"pid": 999999, "host": "h", "command": "sws eval", "since": "t"}))
    with run_lock(tmp_path):
        assert json.loads(RunDir(tmp_path).lock.read_text())["pid"] == os.getpid()
    err = " ".join(capsys.readouterr().err.split())
    assert "took over" in err and "pid 999999" in err and "sws eval" in err
    with run_lock(tmp_path):  # released and emptied: no takeover message the next time
        pass
    assert "took over" not in capsys.readouterr().err


@pytest.mark.parametrize("content", [
    json.dumps({"pid": 1, "host": "h\x1b]0;owned\x07", "command": "sws \u202eval\x1b[2J", "since": "t"}),
    "\x1b[31mnot json\x07\u202e\n",
])
def test_a_stale_lock_is_printed_escaped_not_raw(tmp_path, capsys, content):
    RunDir(tmp_path).lock.write_text(content)
    with run_lock(tmp_path):
        pass
    err = " ".join(capsys.readouterr().err.split())
    assert "took over" in err
    assert not any(char in err for char in "\x1b\x07\u202e")
    assert "\\x1b" in err


def test_the_lock_holder_sweeps_the_temporaries_a_killed_command_left(tmp_path):
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    leftovers = [run / f"{TEMP_PREFIX}config.yaml.x1.tmp", run / "eval" / f"{TEMP_PREFIX}problems.parquet.x2.tmp"]
    kept = [run / ".notes.tmp", run / "eval" / "problems.parquet", tmp_path / f"{TEMP_PREFIX}a.x3.tmp"]
    for path in leftovers + kept:
        path.write_text("half")
    with run_lock(run):
        assert not any(path.exists() for path in leftovers)
    assert all(path.read_text() == "half" for path in kept)


def _contend(run_dir: str, start, results) -> None:
    start.wait()
    try:
        with run_lock(run_dir, f"worker {os.getpid()}"):
            time.sleep(1.5)
        results.put("proceeded")
    except UserError as error:
        results.put(f"refused: {error}")


def test_of_concurrent_commands_on_one_run_exactly_one_proceeds(tmp_path):
    context = multiprocessing.get_context("spawn")
    results, start = context.Queue(), context.Barrier(4)
    workers = [context.Process(target=_contend, args=(str(tmp_path), start, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join()
    assert outcomes.count("proceeded") == 1, outcomes
    assert all("in use by pid" in outcome for outcome in outcomes if outcome != "proceeded")


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    run_dir, target = tmp_path / "run", tmp_path / "precious.txt"
    run_dir.mkdir()
    target.write_text("precious\n")
    RunDir(run_dir).lock.symlink_to(target)
    with pytest.raises(UserError, match=r"\.sws\.lock: a symbolic link"):
        with run_lock(run_dir):
            pass
    assert target.read_text() == "precious\n"


def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_path):
    os.mkfifo(RunDir(tmp_path).lock)
    with pytest.raises(UserError, match=r"\.sws\.lock: not a regular file"):
        with run_lock(tmp_path):
            pass


@pytest.mark.parametrize("folder", ["cache", "cache/embeddings", "train/initial"])
def test_a_folder_linked_out_of_the_run_is_refused_when_the_lock_is_taken(tmp_path, folder):
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (run_dir / folder).parent.mkdir(parents=True)
    (run_dir / folder).symlink_to(outside)
    with pytest.raises(UserError, match=rf"{folder}: a symbolic link out of the run directory"):
        with run_lock(run_dir):
            pass
    assert list(outside.iterdir()) == []


def test_links_inside_the_run_and_links_to_files_are_left_alone(tmp_path):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval-latest").symlink_to(tmp_path / "eval")
    (tmp_path / "problems.parquet").symlink_to(tmp_path.parent / "elsewhere.parquet")
    with run_lock(tmp_path):
        pass
