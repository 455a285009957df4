"""Split an integer budget over named shares (largest-remainder / Hamilton apportionment)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction


def largest_remainder(shares: Mapping[str, float], total: int) -> dict[str, int]:
    """Integer counts per name, proportional to `shares`, summing exactly to `total`.

    Each name first gets the floor of its quota `total * share / sum(shares)`; the seats left over go to the
    largest fractional remainders, ties broken by name. A zero share always gets zero. Arithmetic is exact
    (fractions), so equal shares tie exactly and the result is deterministic.
    """
    if total < 0:
        raise ValueError(f"total must be non-negative, got {total}")
    for name, share in shares.items():
        if not math.isfinite(share) or share < 0:
            raise ValueError(f"share of {name!r} must be a finite non-negative number, got {share}")
    exact_shares = {name: Fraction(share) for name, share in shares.items()}
    share_sum = sum(exact_shares.values(), Fraction(0))
    if share_sum == 0:
        if total == 0:
            return dict.fromkeys(shares, 0)
        raise ValueError(f"cannot split a budget of {total} over shares that are all zero")
    quotas = {name: share * total / share_sum for name, share in exact_shares.items()}
    counts = {name: math.floor(quota) for name, quota in quotas.items()}
    left_over = total - sum(counts.values())
    by_remainder = sorted(quotas, key=lambda name: (-(quotas[name] - counts[name]), name))
    for name in by_remainder[:left_over]:
        counts[name] += 1
    return counts
