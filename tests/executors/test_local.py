from __future__ import annotations

import os

from sws.config import PipelineConfig
from sws.executors.local import LocalExecutor


def pool_sizes(items, pool):
    return [pool.n_workers for _ in items]


def test_the_grading_pool_has_one_process_per_cpu_unless_grading_workers_says_otherwise(tmp_path):
    default = PipelineConfig()
    sized = PipelineConfig.model_validate({"grading": {"workers": 3}})

    assert LocalExecutor(default, tmp_path).map_graded(pool_sizes, ["a"]) == [os.cpu_count()]
    assert LocalExecutor(sized, tmp_path).map_graded(pool_sizes, ["a", "b"]) == [3, 3]
