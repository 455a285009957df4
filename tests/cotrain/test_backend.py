import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sws.config import load_config
from sws.cotrain.backend import CotrainBackendConfig, TinkerPolicyConfig, make_learner
from sws.cotrain.learner import TorchLearner
from sws.cotrain.tinker_learner import connect
from sws.errors import UserError
from sws.worlds.arith.policy import build_policy

POLICY = TinkerPolicyConfig(base_url="http://127.0.0.1:8000", base_model="Qwen/Qwen2.5-1.5B-Instruct")


def test_the_local_backend_is_the_default_and_trains_in_this_process(tmp_path) -> None:
    learner = make_learner(CotrainBackendConfig(), "synthesizer", build_policy(tmp_path / "policy"), 1e-3, seed=0)
    assert isinstance(learner, TorchLearner) and learner.optimizer.param_groups[0]["lr"] == 1e-3


def test_the_tinker_backend_gives_each_role_its_own_server_and_model(monkeypatch) -> None:
    pytest.importorskip("tinker")
    created = []

    class _Service:
        def __init__(self, base_url, api_key) -> None:
            self.base_url, self.api_key = base_url, api_key

        def create_lora_training_client(self, base_model, rank, seed):
            created.append((self.base_url, self.api_key, base_model, rank, seed))
            raise ConnectionError("no server in this test")

    monkeypatch.setattr("tinker.ServiceClient", _Service)
    monkeypatch.setenv("TINKER_API_KEY", "tml-secret")
    synthesizer = TinkerPolicyConfig(base_url="http://127.0.0.1:9", base_model="Qwen/Qwen3-8B", lora_rank=64)
    backend = CotrainBackendConfig(backend="tinker", synthesizer=synthesizer, reasoner=POLICY)
    for role in ("synthesizer", "reasoner"):
        with pytest.raises(UserError, match=rf"no server in this test.*cotrain\.{role}\.base_url"):
            make_learner(backend, role, Path("never-read"), 1e-5, seed=3)
    assert created == [("http://127.0.0.1:9", "tml-secret", "Qwen/Qwen3-8B", 64, 3),
                       ("http://127.0.0.1:8000", "tml-secret", "Qwen/Qwen2.5-1.5B-Instruct", 32, 3)]


def test_tinker_without_both_policies_is_refused() -> None:
    with pytest.raises(ValidationError, match="cotrain.synthesizer and cotrain.reasoner"):
        CotrainBackendConfig(backend="tinker", reasoner=POLICY)


def test_the_key_comes_from_the_environment_and_a_missing_one_names_the_variable(monkeypatch) -> None:
    backend = CotrainBackendConfig(backend="tinker", synthesizer=POLICY, reasoner=POLICY, api_key_env="SWS_TEST_KEY")
    monkeypatch.delenv("SWS_TEST_KEY", raising=False)
    with pytest.raises(UserError, match=r"\$SWS_TEST_KEY is empty; fix: export SWS_TEST_KEY="):
        backend.api_key()
    monkeypatch.setenv("SWS_TEST_KEY", "tml-secret")
    assert backend.api_key() == "tml-secret" and "tml-secret" not in backend.model_dump_json()


def test_a_missing_client_package_is_one_line_naming_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tinker", None)
    backend = CotrainBackendConfig(backend="tinker", synthesizer=POLICY, reasoner=POLICY)
    monkeypatch.setenv(backend.api_key_env, "tml-secret")
    with pytest.raises(UserError, match=r"pip install 'sws\[tinker\]'"):
        connect(backend, POLICY, 1e-6, "reasoner", seed=0)


def test_the_pipeline_s_cotrain_section_names_the_backend(tmp_path) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("world: arith\ncotrain: {backend: tinker, synthesizer: {base_model: Qwen/Qwen2.5-1.5B},"
                        " reasoner: {base_model: Qwen/Qwen2.5-1.5B, lora_rank: 16}}\n")
    section = load_config(pipeline).cotrain
    assert section.backend == "tinker" and section.reasoner.lora_rank == 16
    pipeline.write_text("world: arith\ncotrain: {backend: tinker}\n")
    with pytest.raises(UserError, match="cotrain.synthesizer and cotrain.reasoner"):
        load_config(pipeline)
