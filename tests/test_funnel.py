import pytest

from sws.engines import Completion
from sws.errors import UserError
from sws.funnel import FunnelRow, funnel_row, read_funnel
from sws.manifests import StageResult
from sws.run_dir import RunDir
from sws.runner import commit_stage


def step_with_funnel(run_dir, funnel) -> None:
    output = run_dir / "out.txt"

    def body() -> StageResult:
        output.write_text("x")
        return StageResult("generate", info={"funnel": funnel})

    commit_stage(run_dir, "generate", config={}, inputs=[], outputs=[output], body=body)


@pytest.mark.parametrize("row", [
    FunnelRow("generate", 10, 7, {"too_long": 3}),
    funnel_row("categorize", 4, 3, ["uncategorized"], [Completion("a")] * 6,
               ["no_domain", "unlisted_domain", "no_domain"]),
])
def test_the_funnel_row_a_step_kept_reads_back(tmp_path, row):
    step_with_funnel(tmp_path, row.as_info())
    assert read_funnel(tmp_path, ["generate", "rate"]) == [row]


def test_replies_set_aside_are_counted_by_reason_most_frequent_first():
    info = funnel_row("categorize", 4, 3, ["uncategorized"], [Completion("a")] * 6,
                      ["unlisted_domain", "no_domain", "no_domain"]).as_info()
    assert list(info["replies_rejected"].items()) == [("no_domain", 2), ("unlisted_domain", 1)]
    assert "replies_rejected" not in funnel_row("generate", 1, 1, []).as_info()


@pytest.mark.parametrize("funnel", ["x", {"step": "generate"}, {"step": "generate", "in": "many", "kept": 1},
                                    {"step": "generate", "in": 1, "kept": 1, "rejected": 5}])
def test_a_funnel_row_of_the_wrong_shape_is_one_line_naming_the_manifest(tmp_path, funnel):
    step_with_funnel(tmp_path, funnel)
    with pytest.raises(UserError, match=rf"{RunDir(tmp_path).manifest('generate')}: field 'info.funnel'"):
        read_funnel(tmp_path, ["generate"])
