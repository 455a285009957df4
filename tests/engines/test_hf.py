from __future__ import annotations

from pathlib import Path

import pytest

from sws.config import EngineConfig
from sws.engines import make_engine
from sws.engines.base import Request
from sws.engines.hf import HFEngine
from sws.errors import UserError

CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"


@pytest.fixture(scope="module")
def engine(random_policy: Path) -> HFEngine:
    return HFEngine(EngineConfig(engine="hf", model=str(random_policy), options={"chat_template": CHAT_TEMPLATE}))


def test_each_request_gets_n_completions_in_order(engine: HFEngine) -> None:
    requests = [Request(prompt="Compute 1+2.\n", n=3, max_tokens=8, seed=1),
                Request(prompt="Compute 100-7.\n", n=1, max_tokens=5, seed=2, temperature=0.5),
                Request(prompt="Compute 3*4.\n", n=2, max_tokens=8, seed=3)]
    results = engine.generate(requests)
    assert [len(completions) for completions in results] == [3, 1, 2]
    for request, completions in zip(requests, results, strict=True):
        assert all(0 < completion.tokens <= request.max_tokens for completion in completions)


def test_same_seeds_give_the_same_samples_and_other_seeds_differ(engine: HFEngine) -> None:
    requests = [Request(prompt="Compute 12+30.\n", n=4, max_tokens=12, seed=7)]
    again = engine.generate(requests)
    assert engine.generate(requests) == again
    assert engine.generate([Request(prompt="Compute 12+30.\n", n=4, max_tokens=12, seed=8)]) != again
    assert len({completion.text for completion in again[0]}) > 1


def test_left_padding_does_not_change_greedy_output(engine: HFEngine) -> None:
    short, long = "Compute 1+2.\n", "Compute (123+456)*7-89.\n"
    alone = [engine.generate([Request(prompt=p, temperature=0.0, max_tokens=10)])[0] for p in (short, long)]
    batched = engine.generate([Request(prompt=p, temperature=0.0, max_tokens=10) for p in (short, long)])
    assert batched == alone


def test_batches_are_split_without_changing_results(random_policy: Path) -> None:
    requests = [Request(prompt=f"Compute {i}+{i}.\n", temperature=0.0, max_tokens=6) for i in range(5)]
    small = HFEngine(EngineConfig(engine="hf", model=str(random_policy), options={"batch_size": 2}))
    large = HFEngine(EngineConfig(engine="hf", model=str(random_policy), options={"batch_size": 64}))
    assert small.generate(requests) == large.generate(requests)


def test_a_stop_string_ends_the_completion_and_is_left_out(engine: HFEngine) -> None:
    free = engine.generate([Request(prompt="Compute 5+5.\n", temperature=0.0, max_tokens=20)])[0][0]
    marker = free.text[3]
    stopped = engine.generate([Request(prompt="Compute 5+5.\n", temperature=0.0, max_tokens=20, stop=(marker,))])
    assert stopped[0][0].text == free.text[:free.text.index(marker)]


def test_chat_messages_use_the_chat_template_option(engine: HFEngine) -> None:
    chat = Request(messages=({"role": "user", "content": "Compute 2+2."},), temperature=0.0, max_tokens=8)
    raw = Request(prompt="Compute 2+2.\n", temperature=0.0, max_tokens=8)
    assert engine.generate([chat]) == engine.generate([raw])


def test_chat_without_a_template_is_a_user_error(random_policy: Path) -> None:
    engine = HFEngine(EngineConfig(engine="hf", model=str(random_policy)))
    with pytest.raises(UserError, match="has no chat template.*'chat_template'"):
        engine.generate([Request(messages=({"role": "user", "content": "hi"},))])


def test_an_unknown_option_is_a_user_error(random_policy: Path) -> None:
    with pytest.raises(UserError, match="engine option 'tensor_parallel' is not used by the hf engine"):
        make_engine(EngineConfig(engine="hf", model=str(random_policy), options={"tensor_parallel": 2}))


def test_a_completion_that_hits_max_tokens_is_reported_cut_off(engine: HFEngine) -> None:
    samples = engine.generate([Request(prompt="Compute 1+2.\n", n=8, max_tokens=3, seed=4)])[0]
    assert any(c.truncated for c in samples)
    assert not any(c.truncated for c in samples if c.tokens < 3)


def test_the_first_completion_of_each_request_carries_its_prompt_tokens(engine: HFEngine) -> None:
    prompts = ["Compute 1+2.\n", "Compute 100-7 then add 12.\n"]
    results = engine.generate([Request(prompt=prompt, n=2, max_tokens=4, seed=1) for prompt in prompts])
    for prompt, completions in zip(prompts, results, strict=True):
        assert [c.prompt_tokens for c in completions] == [len(engine.tokenizer(prompt)["input_ids"]), 0]
