"""Float results that do not depend on the process's thread count.

A matrix product split over more threads may add its terms in another order, so its last bits can depend on
`torch.set_num_threads` (which the trainers, the bootstrap and the user's environment set differently). What
decides a table's bytes (the embeddings and distances of selection) is computed on one thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

THREADS = 1


@contextmanager
def pinned_threads() -> Iterator[None]:
    """torch on THREADS threads for the block, then as it was."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
