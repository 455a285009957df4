"""Concept-set sampling: sets per second of `sws.concept_sampling` against a plain Python per-candidate loop of
the same algorithm, in the same process, with their output distributions compared.

The graph is MATH-sized for one category: 400 concepts, 384-dim unit embeddings, 1,500 problems listing 5
concepts each with Zipf-like popularity. Both implementations draw from the same seeded Generator in the same
order (one uniform per pick, one integer per level), so they should produce the same sets; the report gives the
share of identical sets and the total-variation distance between their concept frequencies.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import numpy as np

from sws.concept_sampling import ConceptGraph, SamplerSettings, build_graph, sample_concept_sets

N_CONCEPTS = 400
N_PROBLEMS = 1500
DIM = 384
N_SETS_FAST = 2000
N_SETS_PLAIN = 100
LEVELS = ("easy", "medium", "hard")


def benchmark_graph() -> ConceptGraph:
    rng = np.random.default_rng(0)
    names = [f"concept {index}" for index in range(N_CONCEPTS)]
    popularity = 1.0 / np.arange(1, N_CONCEPTS + 1)
    popularity /= popularity.sum()
    lists = [[names[i] for i in rng.choice(N_CONCEPTS, size=5, replace=False, p=popularity)]
             for _ in range(N_PROBLEMS)]
    vectors = rng.normal(size=(N_CONCEPTS, DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return build_graph(lists, dict(zip(names, vectors, strict=True)))


class PlainSampler:
    """The same algorithm with Python lists and a loop over candidates: the baseline."""

    def __init__(self, graph: ConceptGraph, settings: SamplerSettings) -> None:
        self.graph = graph
        self.settings = settings
        self.frequency = [float(f) for f in graph.frequency]
        self.embeddings = graph.embeddings.tolist()
        dense = graph.cooccurrence.toarray()
        self.cooc = [{j: float(dense[i, j]) for j in range(graph.size) if dense[i, j]} for i in range(graph.size)]
        self.max_cooc = float(dense.max()) or 1.0

    @staticmethod
    def draw(weights: list[float], uniform: float) -> int:
        total = math.fsum(weights)
        target, running = uniform * total, 0.0
        for index, weight in enumerate(weights):
            running += weight
            if running > target and weight > 0:
                return index
        return max(i for i, weight in enumerate(weights) if weight > 0)

    def sample(self, rng: np.random.Generator) -> list[int]:
        size = min(self.settings.set_size, self.graph.size)
        chosen = [self.draw(self.frequency, rng.random())]
        while len(chosen) < size:
            dim = len(self.embeddings[0])
            mean = [sum(self.embeddings[c][d] for c in chosen) / len(chosen) for d in range(dim)]
            norm = math.sqrt(sum(value * value for value in mean))
            scores: list[float | None] = []
            for j in range(self.graph.size):
                if j in chosen:
                    scores.append(None)
                    continue
                cooc = sum(self.cooc[c].get(j, 0.0) for c in chosen) / (len(chosen) * self.max_cooc)
                cosine = sum(a * b for a, b in zip(self.embeddings[j], mean, strict=True)) / norm
                scores.append((self.settings.cooc_weight * cooc + self.settings.sim_weight * cosine)
                              / self.settings.temperature)
            top = max(score for score in scores if score is not None)
            weights = [0.0 if score is None else math.exp(score - top) for score in scores]
            chosen.append(self.draw(weights, rng.random()))
        return chosen

    def sample_sets(self, n_sets: int, rng: np.random.Generator) -> list[tuple[tuple[str, ...], str]]:
        seen, sets = set(), []
        for _ in range(20 * n_sets):
            if len(sets) == n_sets:
                break
            indices = self.sample(rng)
            level = LEVELS[int(rng.integers(len(LEVELS)))]
            key = (frozenset(indices), level)
            if key not in seen:
                seen.add(key)
                sets.append((tuple(self.graph.concepts[i] for i in indices), level))
        return sets


def total_variation(left: Counter, right: Counter) -> float:
    left_total, right_total = sum(left.values()), sum(right.values())
    keys = set(left) | set(right)
    return 0.5 * sum(abs(left[k] / left_total - right[k] / right_total) for k in keys)


def main() -> None:
    graph = benchmark_graph()
    settings = SamplerSettings(set_size=5, temperature=0.2, cooc_weight=1.0, sim_weight=1.0)
    plain = PlainSampler(graph, settings)

    started = time.perf_counter()
    fast_sets, _ = sample_concept_sets(graph, N_SETS_FAST, settings, LEVELS, np.random.default_rng(1))
    fast_rate = len(fast_sets) / (time.perf_counter() - started)
    started = time.perf_counter()
    plain_sets = plain.sample_sets(N_SETS_PLAIN, np.random.default_rng(1))
    plain_rate = len(plain_sets) / (time.perf_counter() - started)

    same_seed_fast = [(drawn.concepts, drawn.level) for drawn in fast_sets[:N_SETS_PLAIN]]
    identical = sum(a == b for a, b in zip(same_seed_fast, plain_sets, strict=True)) / N_SETS_PLAIN
    frequencies = [Counter(c for concepts, _ in sets for c in concepts) for sets in (same_seed_fast, plain_sets)]
    tv_same_seed = total_variation(*frequencies)
    # two independent numpy runs of the same size: the sampling noise floor for the distance
    other, _ = sample_concept_sets(graph, N_SETS_PLAIN, settings, LEVELS, np.random.default_rng(2))
    tv_noise = total_variation(frequencies[0], Counter(c for drawn in other for c in drawn.concepts))
    print(f"combine: {N_CONCEPTS} concepts, set size {settings.set_size}: numpy {fast_rate:.0f} sets/s, "
          f"plain Python {plain_rate:.1f} sets/s, ratio {fast_rate / plain_rate:.0f}x")
    print(f"same seed: {identical:.0%} of {N_SETS_PLAIN} sets identical, concept-frequency TV distance "
          f"{tv_same_seed:.3f} (two different seeds: {tv_noise:.3f})")


if __name__ == "__main__":
    main()
