import time

import pytest

from sws.errors import UserError
from sws.safe_yaml import MAX_DEPTH, load

BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]",
                  *(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8))])


def test_plain_yaml_with_a_few_aliases_loads():
    assert load("base: &b {lr: 0.1}\nrun: *b\nmerged: {<<: *b, lr: 0.2}\n", "p.yaml") == {
        "base": {"lr": 0.1}, "run": {"lr": 0.1}, "merged": {"lr": 0.2}}


def test_an_alias_bomb_is_refused_at_once():
    started = time.perf_counter()
    with pytest.raises(UserError, match=r"^p\.yaml: not valid YAML \(aliases that expand to more than"):
        load(BOMB, "p.yaml")
    assert time.perf_counter() - started < 2


def test_an_alias_inside_the_node_it_names_is_refused():
    with pytest.raises(UserError, match=r"alias \*a is used inside the node it names \(line 1\)"):
        load("a: &a [1, *a]\n", "p.yaml")


@pytest.mark.parametrize("text", ["[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
                                  "".join(f"{'  ' * i}k:\n" for i in range(MAX_DEPTH + 1)) + "  " * (MAX_DEPTH + 1)
                                  + "v\n", "[" * 5000 + "]" * 5000])
def test_excessive_nesting_is_refused(text):
    with pytest.raises(UserError, match=rf"^p\.yaml: not valid YAML \(nested more than {MAX_DEPTH} levels deep"):
        load(text, "p.yaml")


def test_a_key_given_twice_is_refused_with_its_line():
    with pytest.raises(UserError, match=r"key 'seed' is given twice in one mapping \(line 3\)"):
        load("seed: 1\nworld: arith\nseed: 2\n", "p.yaml")
