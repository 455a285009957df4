"""The checks of a Tinker server's replies on what a hostile server may send: each says what is wrong in words
that go into the run's one error line (tests/cotrain/test_tinker_hostile.py runs them under `sws run`)."""

from types import SimpleNamespace

import numpy as np
import pytest

from sws.cotrain.tinker_replies import MalformedReply, forward_logprobs, loss_sum, sampled_tokens, state_path


def samples(*token_lists) -> SimpleNamespace:
    return SimpleNamespace(sequences=[SimpleNamespace(tokens=tokens) for tokens in token_lists])


def scored(*values) -> SimpleNamespace:
    return SimpleNamespace(loss_fn_outputs=[{"logprobs": np.asarray(row, np.float32)} for row in values])


def test_good_replies_give_what_the_learner_needs() -> None:
    assert sampled_tokens(samples([1, 2], [3]), 2, vocabulary_size=4) == [[1, 2], [3]]
    assert forward_logprobs(scored([-1.0, -0.5], [-2.0]), [2, 1]) == [[-1.0, -0.5], [-2.0]]
    assert loss_sum(SimpleNamespace(metrics={"loss:sum": -0.25})) == -0.25
    assert state_path(SimpleNamespace(path="tinker://model/weights/s-1")) == "tinker://model/weights/s-1"


@pytest.mark.parametrize("reply, n, problem, tokenizer", [
    (samples([1]), 2, "1 of the 2 samples asked for came back", False),
    (SimpleNamespace(), 2, "none of the 2 samples asked for came back", False),
    (samples([1.5]), 1, "not a list of integer token ids", False),
    (samples([True]), 1, "not a list of integer token ids", False),
    (samples(None), 1, "not a list of integer token ids", False),
    (samples([4]), 1, "token id 4, outside the tokenizer's vocabulary of 4", True),
    (samples([-1]), 1, "token id -1, outside", True),
])
def test_a_sampling_reply_without_the_asked_samples_is_refused(reply, n, problem, tokenizer) -> None:
    with pytest.raises(MalformedReply, match=problem) as refused:
        sampled_tokens(reply, n, vocabulary_size=4)
    assert refused.value.tokenizer == tokenizer


@pytest.mark.parametrize("reply, problem", [
    (scored([-1.0]), "1 of the 2 sequences sent came back scored"),
    (SimpleNamespace(loss_fn_outputs=[{}, {}]), "has no logprobs"),
    (scored([-1.0], [-1.0, -1.0]), "has 2 logprobs for its 1 tokens"),
    (scored([-1.0], [float("nan")]), "not a finite number"),
    (scored([-1.0], [float("-inf")]), "not a finite number"),
])
def test_a_forward_reply_that_does_not_score_each_token_once_is_refused(reply, problem) -> None:
    with pytest.raises(MalformedReply, match=problem):
        forward_logprobs(reply, [1, 1])


@pytest.mark.parametrize("metrics", [{}, {"loss:sum": float("nan")}, {"loss:sum": "0.5"}, None])
def test_a_gradient_reply_without_a_finite_loss_is_refused(metrics) -> None:
    with pytest.raises(MalformedReply, match="no finite loss:sum"):
        loss_sum(SimpleNamespace(metrics=metrics))


@pytest.mark.parametrize("path", ["", None, 5])
def test_a_save_reply_without_a_path_is_refused(path) -> None:
    with pytest.raises(MalformedReply, match="no path for the saved state"):
        state_path(SimpleNamespace(path=path))
