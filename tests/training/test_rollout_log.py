import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sws.tables import SCHEMAS
from sws.training.rollout_log import RolloutLog


def test_flushed_rows_come_back_in_logged_order_with_the_rollouts_schema(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    log.record(1, "b", 8, 3)
    log.record(1, "a", 8, 0)
    log.flush()
    log.record(2, "c", 8, 8)
    log.flush()

    table = log.table()

    assert table.schema == pl.Schema({**SCHEMAS["rollouts"], "dropped": pl.Boolean})
    assert table.rows() == [(1, "b", 8, 3, False), (1, "a", 8, 0, False), (2, "c", 8, 8, False)]


def test_rows_are_only_on_disk_once_flushed(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    log.record(1, "a", 4, 1)

    assert log.table().height == 0
    log.flush()
    assert RolloutLog(tmp_path / "rollouts").table().rows() == [(1, "a", 4, 1, False)]


def test_truncate_after_forgets_later_steps_on_disk_and_in_the_buffer(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    for step in (1, 2, 3):
        log.record(step, f"p{step}", 4, 1)
    log.flush()
    for step in (4, 5):
        log.record(step, f"p{step}", 4, 1)
    log.flush()
    log.record(6, "p6", 4, 1)

    log.truncate_after(2)
    log.flush()

    assert log.table()["step"].to_list() == [1, 2]
    assert len(list((tmp_path / "rollouts").iterdir())) == 1


@settings(max_examples=60, deadline=None)
@given(
    total_steps=st.integers(1, 30),
    save_every=st.integers(1, 10),
    kills=st.lists(st.tuples(st.integers(1, 30), st.booleans()), max_size=3),
    groups_per_step=st.integers(1, 3),
)
# A kill on the last step after its checkpoint is complete: the rerun finds every step done.
@example(total_steps=3, save_every=1, kills=[(2, False), (2, False)], groups_per_step=1)
def test_killed_and_resumed_runs_log_every_step_exactly_once(
    tmp_path_factory, total_steps, save_every, kills, groups_per_step
):
    """Simulate the trainer: rows per step, a flush before each checkpoint, kills, resumes from the last one.

    A kill either loses the unflushed buffer, or (`while_saving`) lands after the flush but before the
    checkpoint is complete, leaving rows on disk that are newer than any checkpoint.
    """
    shard_dir = tmp_path_factory.mktemp("rollouts")
    checkpoint = 0
    pending_kills = sorted((step, while_saving) for step, while_saving in kills if step < total_steps)
    finished = False
    while not finished:
        log = RolloutLog(shard_dir)
        log.truncate_after(checkpoint)
        if checkpoint == total_steps:
            break
        step = checkpoint
        while True:
            step += 1
            for group in range(groups_per_step):
                log.record(step, f"s{step}g{group}", 8, group)
            saving = step % save_every == 0 or step == total_steps
            killed = bool(pending_kills) and step >= pending_kills[0][0]
            if saving:
                log.flush()
                if not (killed and pending_kills[0][1]):
                    checkpoint = step
            if killed:
                pending_kills.pop(0)
                break
            if step == total_steps:
                finished = True
                break

    table = RolloutLog(shard_dir).table()
    assert table.height == total_steps * groups_per_step
    assert table.select("step", "problem_id").is_duplicated().sum() == 0
    assert sorted(set(table["step"].to_list())) == list(range(1, total_steps + 1))


def test_dropped_groups_are_counted_per_step_and_old_shards_kept_every_group(tmp_path):
    from sws.atomic_files import write_parquet
    from sws.training.rollout_log import dropped_per_step

    log = RolloutLog(tmp_path / "rollouts")
    write_parquet(pl.DataFrame([(1, "old", 8, 4)], schema=SCHEMAS["rollouts"], orient="row"),
                  tmp_path / "rollouts" / "from-step-00000001.parquet")
    for step, problem, n_correct, dropped in ((2, "a", 0, True), (2, "b", 3, False), (3, "c", 8, True)):
        log.record(step, problem, 8, n_correct, dropped)
    log.flush()

    assert dropped_per_step(log.table()).rows() == [(1, 1, 0), (2, 2, 1), (3, 1, 1)]
