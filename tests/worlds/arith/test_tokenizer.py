import string

from sws.worlds.arith import generate_problems
from sws.worlds.arith.tokenizer import EOS, PAD, build_tokenizer


def test_every_printable_character_is_one_token_and_round_trips():
    tokenizer = build_tokenizer()
    text = string.printable
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text


def test_problem_and_answer_round_trip_with_eos():
    tokenizer = build_tokenizer()
    for problem in generate_problems(30, seed=0):
        text = f"{problem.problem}\n\\boxed{{{problem.answer}}}"
        ids = tokenizer(text + EOS, add_special_tokens=False)["input_ids"]
        assert ids[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_pad_and_eos_are_distinct_special_tokens():
    tokenizer = build_tokenizer()
    assert tokenizer.pad_token == PAD and tokenizer.eos_token == EOS
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
