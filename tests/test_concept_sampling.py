from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sws.concept_sampling import (
    SamplerSettings,
    build_graph,
    draw_concept_sets,
    next_concept_probabilities,
    sample_concept_sets,
    sample_indices,
)


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def angle_vector(cosine: float) -> np.ndarray:
    """A unit vector whose cosine with (1, 0) is `cosine`."""
    return np.array([cosine, np.sqrt(1 - cosine**2)])


def test_graph_counts_frequencies_and_cooccurrence() -> None:
    lists = [["a", "b", "c"], ["a", "b"], ["c", "d"], ["a", "a"]]
    graph = build_graph(lists, {name: unit(1, index) for index, name in enumerate("abcd")})
    assert graph.concepts == ("a", "b", "c", "d")
    assert graph.frequency.tolist() == [3, 2, 2, 1]
    dense = graph.cooccurrence.toarray()
    assert dense[0, 1] == dense[1, 0] == 2
    assert dense[0, 2] == 1 and dense[2, 3] == 1 and dense[0, 3] == 0
    assert np.all(np.diag(dense) == 0)


def test_with_cooccurrence_off_the_more_similar_candidate_is_drawn_more_often() -> None:
    # "seed" is always drawn first (the others never appear alone); then "near" (cos 0.9) competes with
    # "far" (cos 0.1). Their co-occurrence with "seed" is made *unequal in favour of far*, so with w_c = 0 only
    # the similarity can explain near winning.
    lists = [["seed", "near", "far"]] + [["seed", "far"]] * 20
    embeddings = {"seed": angle_vector(1.0), "near": angle_vector(0.9), "far": angle_vector(0.1)}
    graph = build_graph(lists, embeddings)
    settings = SamplerSettings(set_size=2, temperature=0.5, cooc_weight=0.0, sim_weight=1.0)
    rng = np.random.default_rng(0)
    seed_index = graph.concepts.index("seed")
    seconds = Counter()
    for _ in range(4000):
        drawn = sample_indices(graph, settings, rng)
        if drawn[0] == seed_index:
            seconds[graph.concepts[drawn[1]]] += 1
    expected_ratio = np.exp((0.9 - 0.1) / 0.5)
    assert seconds["near"] > seconds["far"]
    assert seconds["near"] / seconds["far"] == pytest.approx(expected_ratio, rel=0.15)


def test_with_similarity_off_cooccurrence_decides() -> None:
    lists = [["seed", "often"]] * 3 + [["seed", "rarely"]]
    embeddings = {"seed": unit(1, 0), "often": unit(0, 1), "rarely": unit(1, 0.01)}
    graph = build_graph(lists, embeddings)
    settings = SamplerSettings(set_size=2, temperature=1.0, cooc_weight=1.0, sim_weight=0.0)
    probabilities = next_concept_probabilities(graph, [graph.concepts.index("seed")], settings)
    often, rarely = probabilities[graph.concepts.index("often")], probabilities[graph.concepts.index("rarely")]
    # counts 3 and 1, scaled by the category's largest count (3)
    assert often / rarely == pytest.approx(np.exp((3 - 1) / 3))


def test_cooccurrence_is_the_mean_over_the_selection() -> None:
    lists = [["a", "b", "x"]] * 4 + [["a", "y"]] * 2
    embeddings = {name: unit(1, 0) for name in ("a", "b", "x", "y")}
    graph = build_graph(lists, embeddings)
    settings = SamplerSettings(set_size=3, temperature=1.0, cooc_weight=1.0, sim_weight=0.0)
    chosen = [graph.concepts.index("a"), graph.concepts.index("b")]
    probabilities = next_concept_probabilities(graph, chosen, settings)
    # mean co-occurrence with {a, b}: x (4 + 4) / 2 = 4, y (2 + 0) / 2 = 1; the largest count is 4
    x, y = probabilities[graph.concepts.index("x")], probabilities[graph.concepts.index("y")]
    assert x / y == pytest.approx(np.exp((4 - 1) / 4))
    assert probabilities[chosen].tolist() == [0.0, 0.0]


def test_each_candidate_is_scored_with_its_own_similarity() -> None:
    names = ["p", "q", "r", "s", "t"]
    rng = np.random.default_rng(3)
    embeddings = {name: unit(*rng.normal(size=8)) for name in names}
    lists = [names]
    settings = SamplerSettings(set_size=3, temperature=0.3, cooc_weight=0.0, sim_weight=1.0)
    graph = build_graph(lists, embeddings)
    chosen = [graph.concepts.index("p")]
    probabilities = dict(zip(graph.concepts, next_concept_probabilities(graph, chosen, settings), strict=True))
    cosines = {name: float(embeddings[name] @ embeddings["p"]) for name in names if name != "p"}
    weights = {name: np.exp(cosine / 0.3) for name, cosine in cosines.items()}
    total = sum(weights.values())
    for name in cosines:
        assert probabilities[name] == pytest.approx(weights[name] / total)


def test_large_cooccurrence_counts_never_give_nan() -> None:
    lists = [["a", "b", "c", "d"]] * 5
    graph = build_graph(lists, {name: unit(1, index) for index, name in enumerate("abcd")})
    graph.cooccurrence.data[:] = np.arange(1, graph.cooccurrence.nnz + 1) * 10**9
    # scores up to w_c / T = 10^6: exp overflows unless the softmax subtracts the maximum
    settings = SamplerSettings(set_size=4, temperature=1e-6, cooc_weight=1.0, sim_weight=1.0)
    for chosen in ([0], [1], [0, 2]):
        probabilities = next_concept_probabilities(graph, chosen, settings)
        assert np.all(np.isfinite(probabilities))
        assert probabilities.sum() == pytest.approx(1.0)
    sets, _ = sample_concept_sets(graph, 3, settings, ["easy"], np.random.default_rng(0))
    assert sets and all(len(set(drawn.concepts)) == 4 for drawn in sets)


def test_first_concept_follows_frequency() -> None:
    lists = [["common"]] * 30 + [["rare"]] * 10
    graph = build_graph(lists, {"common": unit(1, 0), "rare": unit(0, 1)})
    settings = SamplerSettings(set_size=1)
    rng = np.random.default_rng(1)
    firsts = Counter(graph.concepts[sample_indices(graph, settings, rng)[0]] for _ in range(4000))
    assert firsts["common"] / 4000 == pytest.approx(0.75, abs=0.03)


def test_same_seed_gives_the_same_sets_and_sets_are_distinct() -> None:
    rng = np.random.default_rng(7)
    names = [f"c{index}" for index in range(12)]
    lists = [list(rng.choice(names, size=4, replace=False)) for _ in range(40)]
    embeddings = {name: unit(*rng.normal(size=6)) for name in names}
    graph = build_graph(lists, embeddings)
    settings = SamplerSettings(set_size=4, temperature=0.5)
    first, _ = sample_concept_sets(graph, 30, settings, ["easy", "hard"], np.random.default_rng(11))
    again, _ = sample_concept_sets(graph, 30, settings, ["easy", "hard"], np.random.default_rng(11))
    other, _ = sample_concept_sets(graph, 30, settings, ["easy", "hard"], np.random.default_rng(12))
    assert first == again
    assert first != other
    keys = [(frozenset(drawn.concepts), drawn.level) for drawn in first]
    assert len(keys) == len(set(keys)) == 30
    assert all(len(set(drawn.concepts)) == 4 for drawn in first)
    assert {drawn.level for drawn in first} == {"easy", "hard"}


def test_a_small_category_supplies_only_its_distinct_sets() -> None:
    graph = build_graph([["a", "b", "c"]], {name: unit(1, index) for index, name in enumerate("abc")})
    sets, _ = sample_concept_sets(graph, 10, SamplerSettings(set_size=2), ["easy"], np.random.default_rng(0))
    assert sorted(sorted(drawn.concepts) for drawn in sets) == [["a", "b"], ["a", "c"], ["b", "c"]]


def test_set_size_larger_than_the_category_takes_every_concept() -> None:
    graph = build_graph([["a", "b"]], {"a": unit(1, 0), "b": unit(0, 1)})
    sets, _ = sample_concept_sets(graph, 5, SamplerSettings(set_size=5), ["easy"], np.random.default_rng(0))
    assert [sorted(drawn.concepts) for drawn in sets] == [["a", "b"]]


def set_probabilities(graph, settings: SamplerSettings) -> dict[frozenset[str], float]:
    """The exact probability of each unordered 2-concept set: first by frequency, then the next-concept law."""
    first = graph.frequency / graph.frequency.sum()
    exact: Counter = Counter()
    for i in range(graph.size):
        second = next_concept_probabilities(graph, [i], settings)
        for j in range(graph.size):
            if second[j] > 0:
                exact[frozenset({graph.concepts[i], graph.concepts[j]})] += first[i] * second[j]
    return dict(exact)


def test_repeated_draws_follow_the_sampling_distribution_and_distinct_sets_do_not() -> None:
    from scipy.stats import chisquare

    lists = [["a", "b"]] * 6 + [["a", "c"]] * 3 + [["c", "d"]] + [["b", "d", "e"]]
    embeddings = {name: unit(1, index) for index, name in enumerate("abcde")}
    graph = build_graph(lists, embeddings)
    settings = SamplerSettings(set_size=2, temperature=0.5)
    exact = set_probabilities(graph, settings)
    assert sum(exact.values()) == pytest.approx(1.0)
    n = 6000
    drawn = Counter(frozenset(each.concepts) for each in
                    draw_concept_sets(graph, n, settings, ["easy"], np.random.default_rng(3)))
    keys = sorted(exact, key=sorted)
    _, p_value = chisquare([drawn[key] for key in keys], [n * exact[key] for key in keys])
    assert p_value > 0.001
    # the most likely set is drawn far more often than the least likely one, as the law says
    likeliest, rarest = max(exact, key=exact.get), min(exact, key=exact.get)
    assert drawn[likeliest] > 5 * max(drawn[rarest], 1)
    # distinct sets enumerate the space: every set appears once, whatever its probability
    distinct, _ = sample_concept_sets(graph, len(exact), settings, ["easy"], np.random.default_rng(3))
    assert Counter(frozenset(each.concepts) for each in distinct) == Counter(dict.fromkeys(exact, 1))
