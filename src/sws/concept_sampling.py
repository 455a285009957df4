"""Sampling concept sets from one category's concept graph (frequencies, co-occurrence, embeddings).

One set is drawn sequentially without replacement: the first concept with probability proportional to its
frequency (how many weak problems list it); each next concept j among those not yet chosen with

    p(j) ∝ exp((w_c · cooc(S, j) + w_s · cos(mean(S), j)) / T)

where cooc(S, j) is the *mean* over the chosen concepts i of count(i, j), the number of weak problems that list
both, divided by the largest such count in the category; and cos(mean(S), j) is the cosine similarity between
j's embedding and the mean embedding of the chosen concepts. The mean (not the sum) keeps the term's scale as the
set grows, and the division by the category's largest count keeps it in [0, 1] like the cosine, so `T` and the
weights mean the same on a 50-problem category and a 5,000-problem one (with raw counts in the hundreds and
T = 0.2, every draw after the first would be deterministic). Every candidate's score is computed from its own
row, in one vectorised pass; the softmax subtracts the maximum score, so no count or T can overflow it. All randomness comes from the numpy Generator passed in: one uniform draw per pick (inverse CDF),
then one integer draw for the level, so the same seed gives the same sets.

`draw_concept_sets` makes independent draws from that distribution (a set drawn twice is asked for twice, as two
variants), so the sets requested follow it; `sample_concept_sets` keeps distinct sets only, which in a small
category enumerates nearly every combination instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy import sparse

# Draws per wanted set before giving up on finding new distinct sets in a small category.
ATTEMPTS_PER_SET = 20


@dataclass(frozen=True)
class SamplerSettings:
    set_size: int = 5
    temperature: float = 0.2
    cooc_weight: float = 1.0
    sim_weight: float = 1.0


@dataclass(frozen=True)
class ConceptGraph:
    concepts: tuple[str, ...]
    frequency: np.ndarray  # (V,) problems listing each concept
    cooccurrence: sparse.csr_array  # (V, V) problems listing both; zero diagonal
    embeddings: np.ndarray  # (V, dim), rows L2-normalised

    @property
    def size(self) -> int:
        return len(self.concepts)

    @property
    def max_cooccurrence(self) -> float:
        return float(self.cooccurrence.data.max()) if self.cooccurrence.nnz else 1.0

    def cooccurrence_row(self, index: int) -> np.ndarray:
        row = np.zeros(self.size, dtype=np.float64)
        start, end = self.cooccurrence.indptr[index], self.cooccurrence.indptr[index + 1]
        row[self.cooccurrence.indices[start:end]] = self.cooccurrence.data[start:end]
        return row


@dataclass(frozen=True)
class SampledSet:
    concepts: tuple[str, ...]  # in the order drawn
    level: str


def build_graph(concept_lists: Sequence[Sequence[str]], embedding_of: Mapping[str, np.ndarray]) -> ConceptGraph:
    """The graph of one category from each weak problem's concept list."""
    concepts = tuple(sorted({concept for concepts in concept_lists for concept in concepts}))
    index_of = {concept: index for index, concept in enumerate(concepts)}
    frequency = np.zeros(len(concepts), dtype=np.int64)
    rows: list[int] = []
    cols: list[int] = []
    for listed in concept_lists:
        indices = sorted({index_of[concept] for concept in listed})
        frequency[indices] += 1
        for i in indices:
            for j in indices:
                if i != j:
                    rows.append(i)
                    cols.append(j)
    from scipy import sparse  # loaded on first use: `sws --help` need not import scipy

    counts = sparse.coo_array(
        (np.ones(len(rows), dtype=np.int64), (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64))),
        shape=(len(concepts), len(concepts)),
    ).tocsr()
    counts.sum_duplicates()
    embeddings = np.stack([embedding_of[concept] for concept in concepts]) if concepts else np.zeros((0, 1))
    return ConceptGraph(concepts, frequency, counts, embeddings.astype(np.float64))


def stable_softmax(scores: np.ndarray) -> np.ndarray:
    """softmax over the finite entries of `scores`; -inf entries get probability 0."""
    finite = np.isfinite(scores)
    weights = np.zeros_like(scores, dtype=np.float64)
    weights[finite] = np.exp(scores[finite] - scores[finite].max())
    return weights / weights.sum()


def selection_scores(
    graph: ConceptGraph, cooc_total: np.ndarray, embedding_total: np.ndarray, chosen: Sequence[int],
    settings: SamplerSettings,
) -> np.ndarray:
    """(w_c · scaled mean co-occurrence + w_s · cosine to the selection's mean) / T; -inf for chosen concepts."""
    mean_cooc = cooc_total / (len(chosen) * graph.max_cooccurrence)
    norm = np.linalg.norm(embedding_total)
    cosine = graph.embeddings @ (embedding_total / norm) if norm > 0 else np.zeros(graph.size)
    scores = (settings.cooc_weight * mean_cooc + settings.sim_weight * cosine) / settings.temperature
    scores[list(chosen)] = -np.inf
    return scores


def next_concept_probabilities(graph: ConceptGraph, chosen: Sequence[int], settings: SamplerSettings) -> np.ndarray:
    """The distribution of the next concept given the chosen ones (zero on the chosen ones)."""
    cooc_total = sum((graph.cooccurrence_row(index) for index in chosen), np.zeros(graph.size))
    embedding_total = graph.embeddings[list(chosen)].sum(axis=0)
    return stable_softmax(selection_scores(graph, cooc_total, embedding_total, chosen, settings))


def draw_index(probabilities: np.ndarray, uniform: float) -> int:
    """Inverse-CDF draw; an entry with probability 0 is never returned."""
    cumulative = np.cumsum(probabilities)
    return int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))


def sample_indices(graph: ConceptGraph, settings: SamplerSettings, rng: np.random.Generator) -> list[int]:
    size = min(settings.set_size, graph.size)
    chosen = [draw_index(graph.frequency.astype(np.float64), rng.random())]
    cooc_total = graph.cooccurrence_row(chosen[0])
    embedding_total = graph.embeddings[chosen[0]].copy()
    while len(chosen) < size:
        scores = selection_scores(graph, cooc_total, embedding_total, chosen, settings)
        picked = draw_index(stable_softmax(scores), rng.random())
        chosen.append(picked)
        cooc_total += graph.cooccurrence_row(picked)
        embedding_total += graph.embeddings[picked]
    return chosen


def draw_concept_sets(
    graph: ConceptGraph, n_sets: int, settings: SamplerSettings, levels: Sequence[str], rng: np.random.Generator
) -> list[SampledSet]:
    """`n_sets` independent draws of (concept set, level), repeats included."""
    if graph.size == 0 or not levels:
        return []
    return [draw_set(graph, settings, levels, rng) for _ in range(n_sets)]


def draw_set(graph: ConceptGraph, settings: SamplerSettings, levels: Sequence[str],
             rng: np.random.Generator) -> SampledSet:
    """One concept set, then its level."""
    indices = sample_indices(graph, settings, rng)
    return SampledSet(tuple(graph.concepts[index] for index in indices), levels[int(rng.integers(len(levels)))])


def sample_concept_sets(
    graph: ConceptGraph, n_sets: int, settings: SamplerSettings, levels: Sequence[str], rng: np.random.Generator
) -> tuple[list[SampledSet], int]:
    """Up to `n_sets` distinct (concept set, level) pairs; also the number of duplicate draws dropped.

    Two draws are duplicates when they pick the same concepts (in any order) for the same level: the generator
    gets the same request. Fewer sets come back when the category cannot supply more distinct ones.
    """
    if graph.size == 0 or n_sets <= 0 or not levels:
        return [], 0
    wanted = min(n_sets, len(set(levels)) * math.comb(graph.size, min(settings.set_size, graph.size)))
    seen: set[tuple[frozenset[str], str]] = set()
    sets: list[SampledSet] = []
    duplicates = 0
    for _ in range(ATTEMPTS_PER_SET * wanted):
        if len(sets) == wanted:
            break
        drawn = draw_set(graph, settings, levels, rng)
        key = (frozenset(drawn.concepts), drawn.level)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        sets.append(drawn)
    return sets, duplicates
