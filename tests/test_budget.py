import pytest
from hypothesis import given
from hypothesis import strategies as st

from sws.budget import largest_remainder


def test_hand_computed_split() -> None:
    # quotas 10 * (0.5, 0.3, 0.2) = 5, 3, 2
    assert largest_remainder({"a": 0.5, "b": 0.3, "c": 0.2}, 10) == {"a": 5, "b": 3, "c": 2}


def test_left_over_seats_go_to_the_largest_remainders() -> None:
    # 8 seats over 4/7, 2/7, 1/7: quotas 4.571, 2.286, 1.143 -> floors 4, 2, 1, the seat left goes to a
    assert largest_remainder({"a": 4, "b": 2, "c": 1}, 8) == {"a": 5, "b": 2, "c": 1}
    # 10 seats over 1/6, 2/6, 3/6: 1.667, 3.333, 5 -> floors 1, 3, 5, the seat left goes to a (.667 > .333)
    assert largest_remainder({"a": 1, "b": 2, "c": 3}, 10) == {"a": 2, "b": 3, "c": 5}


def test_equal_remainders_tie_break_by_name_whatever_the_input_order() -> None:
    shares = {"zeta": 1 / 3, "alpha": 1 / 3, "mid": 1 / 3}
    assert largest_remainder(shares, 4) == {"alpha": 2, "mid": 1, "zeta": 1}
    assert largest_remainder(dict(reversed(shares.items())), 4) == {"alpha": 2, "mid": 1, "zeta": 1}


def test_zero_share_gets_zero_even_with_seats_left() -> None:
    assert largest_remainder({"a": 1, "b": 1, "none": 0}, 3) == {"a": 2, "b": 1, "none": 0}


def test_all_zero_shares() -> None:
    assert largest_remainder({"a": 0.0, "b": 0.0}, 0) == {"a": 0, "b": 0}
    with pytest.raises(ValueError, match="all zero"):
        largest_remainder({"a": 0.0, "b": 0.0}, 5)


@pytest.mark.parametrize("shares, total", [({"a": -0.1, "b": 1.1}, 3), ({"a": float("nan")}, 3), ({"a": 1.0}, -1)])
def test_invalid_inputs_raise(shares: dict[str, float], total: int) -> None:
    with pytest.raises(ValueError):
        largest_remainder(shares, total)


@given(
    st.dictionaries(st.text(min_size=1, max_size=5), st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=12)
    .filter(lambda shares: sum(shares.values()) > 0),
    st.integers(0, 100_000),
)
def test_counts_sum_to_total_and_stay_within_one_of_the_quota(shares: dict[str, float], total: int) -> None:
    counts = largest_remainder(shares, total)
    assert sum(counts.values()) == total
    share_sum = sum(shares.values())
    for name, share in shares.items():
        quota = total * share / share_sum
        assert quota - 1 < counts[name] < quota + 1 + 1e-9
        if share == 0:
            assert counts[name] == 0
