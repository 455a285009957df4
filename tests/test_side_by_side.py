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


def sleep_long(pid_file) -> None:
    import time

    pid_file.write_text(str(os.getpid()))
    time.sleep(120)


PARENT = """
import sys
from pathlib import Path
from test_side_by_side import sleep_long
from sws.side_by_side import Task, run_side_by_side
folder = Path(sys.argv[1])
if __name__ == "__main__":
    run_side_by_side([Task("sleep", sleep_long, (folder / "pid",), folder / "sleep.log", folder / "sleep.json")])
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, waiting for its reaper
        return stat.read().split(") ")[1][0] != "Z"


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux's /proc")
def test_a_worker_ends_when_the_process_that_started_it_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env)
    deadline = time.monotonic() + 120
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    worker = int((tmp_path / "pid").read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    ended_by = time.monotonic() + 5
    while alive(worker) and time.monotonic() < ended_by:
        time.sleep(0.1)
    assert not alive(worker), "the worker outlived its killed parent"
