import json
import os

import pytest

from sws import ui
from sws.errors import UserError
from sws.side_by_side import Task, run_side_by_side


def count_to(total: int, status_file, message: str) -> int:
    for step in range(1, total + 1):
        status_file.write_text(json.dumps({"step": step, "total": total, "rate": ""}))
    ui.info(message)
    print("library output")
    return os.getpid()


def fail(status_file) -> None:
    raise UserError("config.yaml: field 'x' is wrong; fix it")


def task(tmp_path, name, function, *args):
    return Task(name, function, args, tmp_path / f"{name}.log", tmp_path / f"{name}.json")


def test_tasks_run_in_their_own_processes_and_log_to_their_own_files(tmp_path):
    tasks = [task(tmp_path, name, count_to, 3, tmp_path / f"{name}.json", f"hello from {name}")
             for name in ("first", "second")]

    pids = run_side_by_side(tasks)

    assert len(set(pids)) == 2 and os.getpid() not in pids
    for name in ("first", "second"):
        log = (tmp_path / f"{name}.log").read_text()
        assert f"hello from {name}" in log and "library output" in log
        assert json.loads((tmp_path / f"{name}.json").read_text())["step"] == 3


def test_a_failing_task_raises_its_error_after_the_other_one_finished(tmp_path):
    tasks = [task(tmp_path, "broken", fail, tmp_path / "broken.json"),
             task(tmp_path, "fine", count_to, 2, tmp_path / "fine.json", "done")]

    with pytest.raises(UserError, match="field 'x' is wrong"):
        run_side_by_side(tasks)
    assert "done" in (tmp_path / "fine.log").read_text()
