from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sws import preflight
from sws.cli import app
from sws.config import parse_config
from sws.errors import UserError
from sws.stage import get_stage

SYNTHESIS = [get_stage(name) for name in ("extract", "combine", "generate", "rate", "label")]


@pytest.mark.parametrize("generator, phrase", [
    ({"engine": "openia", "model": "m"}, "engine 'openia' is not known"),
    ({"engine": "openai", "model": "m", "options": {"base_ur": "http://x"}}, "engine option 'base_ur'"),
    ({"engine": "oracle", "model": "arith-oracle", "options": {"n_mode": "sometimes"}}, "engine option 'n_mode'"),
])
def test_a_bad_engine_of_a_later_step_is_found_before_the_first(monkeypatch, generator, phrase):
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    cfg = parse_config({"roles": {"generator": generator}}, "p.yaml")
    with pytest.raises(UserError, match=phrase):
        preflight.check(cfg, "synthesize", "p.yaml", SYNTHESIS)


def test_sws_synthesize_names_the_bad_engine_before_reading_anything(tmp_path: Path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump({"roles": {"labeler": {"engine": "openia", "model": "m"}}}))
    (tmp_path / "run").mkdir()
    result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path / "run"), "--config", str(pipeline)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: engine 'openia' is not known") and len(result.stderr.splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".sws.lock"]
