"""Faults of the operating system under the real `sws` command: each ends in one `error:` line, never a
traceback, and leaves what was already written as it was."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sws.records import DATA_DIR

SWS = Path(sys.executable).parent / "sws"
SMALL = DATA_DIR / "math500.json"
LARGE = DATA_DIR / "math_train.json"


def sws(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SWS), *args], capture_output=True, text=True, timeout=300)


def assert_one_line(result: subprocess.CompletedProcess, phrase: str, code: int = 2) -> None:
    assert result.returncode == code, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and phrase in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs (root ignores chmod, so read-only and full disks need real mounts)."""
    mounted = []

    def mount(name: str, options: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"this machine does not allow mounting a tmpfs: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()
            and p.name != ".sws.lock"}


def test_a_run_path_that_is_a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    assert_one_line(sws("identify", "--run", str(path)), "not a directory")
    assert path.read_text() == "mine"


def test_a_run_path_under_proc():
    assert_one_line(sws("identify", "--run", "/proc/sws-run"), "/proc/sws-run")


def test_a_read_only_run_directory(tmpfs):
    point = tmpfs("ro", "size=4m")
    run_dir = point / "run"
    assert sws("prepare", "--input", str(SMALL), "--run", str(run_dir)).returncode == 0
    before = snapshot(run_dir)
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
    assert_one_line(sws("prepare", "--input", str(SMALL), "--run", str(run_dir), "--force"), "Read-only file system")
    assert snapshot(run_dir) == before


def test_a_full_disk(tmpfs):
    run_dir = tmpfs("full", "size=160k") / "run"
    assert sws("prepare", "--input", str(SMALL), "--run", str(run_dir)).returncode == 0
    before = snapshot(run_dir)
    assert_one_line(sws("prepare", "--input", str(LARGE), "--run", str(run_dir)), "No space left on device")
    assert snapshot(run_dir) == before


def tables(run_dir: Path) -> dict[str, bytes]:
    return {name: content for name, content in snapshot(run_dir).items() if name.endswith(".parquet")}


def _sws_frames(traceback: str) -> list[str]:
    """The traceback's frames in sws's own modules (not the console script `bin/sws` that imports them)."""
    return [line for line in traceback.splitlines() if line.strip().startswith("File") and "/sws/" in line]


def test_ctrl_c_during_prepare_is_one_line_and_exit_130(tmp_path):
    """Interrupted at several instants, from start-up to writing: each attempt ends in one line (or finishes),
    and the run holds either the old outputs or the complete new ones."""
    run_dir, finished = tmp_path / "run", tmp_path / "finished"
    assert sws("prepare", "--input", str(SMALL), "--run", str(run_dir)).returncode == 0
    assert sws("prepare", "--input", str(LARGE), "--run", str(finished)).returncode == 0
    before, after = tables(run_dir), tables(finished)
    interrupted = 0
    for delay in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        process = subprocess.Popen([str(SWS), "prepare", "--input", str(LARGE), "--run", str(run_dir), "--force"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        assert tables(run_dir) in (before, after)
        assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
        if process.returncode in (0, -signal.SIGINT):
            # Finished, the interrupt coming at interpreter exit; or it came before Python had run any of sws
            # (a loaded machine can take longer than the first delay to start the interpreter).
            assert "Traceback" not in stderr or not _sws_frames(stderr), stderr
            continue
        interrupted += 1
        assert_one_line(subprocess.CompletedProcess(process.args, process.returncode, "", stderr), "interrupted", 130)
    assert interrupted >= 3


@pytest.mark.parametrize("where", ["loading", "parsing", "command"])
def test_ctrl_c_is_one_line_wherever_it_lands(where, monkeypatch, capsys):
    """Typer turns a Ctrl-C during argument parsing into a silent exit 130; a command's becomes typer.Exit(130)."""
    import typer

    import sws.__main__ as entry
    import sws.cli

    def interrupted() -> None:
        if where == "loading":
            raise KeyboardInterrupt
        raise SystemExit(130) if where == "parsing" else typer.Exit(130)

    def run_cli() -> None:
        try:
            interrupted()
        except typer.Exit as stop:  # what typer's runner does with it
            raise SystemExit(stop.exit_code) from None

    monkeypatch.setattr(sws.cli, "main", run_cli)
    with pytest.raises(SystemExit) as stop:
        entry.main()
    assert stop.value.code == 130
    assert capsys.readouterr().err.splitlines() == [
        "error: interrupted; finished stages are kept, the same command resumes"]


def test_sample_on_a_read_only_run_is_one_line(tmpfs, tmp_path):
    """`sws sample` opens the run's request cache without taking the lock: a read-only mount is one line too."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _openai_server import MODEL, serving

    point = tmpfs("ro-cache", "size=4m")
    run_dir = point / "run"
    with serving() as server:
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(f"roles: {{generator: {{engine: openai, model: {MODEL}, "
                            f"options: {{base_url: '{server.base_url}'}}}}}}\n")
        ask = [str(SWS), "sample", "--run", str(run_dir), "--role", "generator", "--config", str(pipeline)]
        env = {**os.environ, "OPENAI_API_KEY": "EMPTY"}
        assert subprocess.run([*ask, "--prompt", "Compute 2+2."], env=env, capture_output=True).returncode == 0
        before = snapshot(run_dir)
        subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
        result = subprocess.run([*ask, "--prompt", "Compute 3+3."], env=env, capture_output=True, text=True,
                                timeout=120)
    assert_one_line(result, "requests.sqlite")
    assert snapshot(run_dir) == before


def test_a_healthy_cache_on_a_read_only_mount_is_not_called_damaged(tmpfs):
    from sws.config import EngineConfig
    from sws.engines import make_engine
    from sws.engines.base import Request
    from sws.errors import UserError

    point = tmpfs("cache", "size=4m")
    oracle, cache, request = EngineConfig(engine="oracle", model="arith-oracle"), point / "requests.sqlite", \
        Request(prompt="Compute 1+1.\n", task="answer", fields={"problem": "1+1"})
    engine = make_engine(oracle, cache)
    engine.generate([request])
    engine.close()
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
    with pytest.raises(UserError) as error:
        make_engine(oracle, cache).generate([request])
    assert str(error.value).startswith(f"{cache}: cannot write the request cache") and "read-only" in str(error.value)
    assert "damaged" not in str(error.value)
