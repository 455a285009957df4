import pytest

from sws.cotrain.rewards import INVALID_REWARD, gate, synthesizer_reward


def test_gate_is_zero_below_half_and_linear_above():
    assert [gate(v) for v in (0.0, 0.5, 0.75, 1.0, 1.2)] == [0.0, 0.0, 0.5, 1.0, 1.0]


@pytest.mark.parametrize(("sr", "synco", "azr"), [
    (0.0, 0.0, 0.0), (0.25, 0.5, 0.75), (0.5, 1.0, 0.5), (0.75, 0.5, 0.25), (1.0, 0.0, 0.0),
])
def test_teachability_curves(sr, synco, azr):
    assert synthesizer_reward(True, 1.0, 1.0, sr) == pytest.approx(synco)
    assert synthesizer_reward(True, 1.0, 1.0, sr, curve="rzero") == pytest.approx(1 - 2 * abs(sr - 0.5))
    assert synthesizer_reward(True, 1.0, 1.0, sr, curve="azr") == pytest.approx(azr)


def test_invalid_card_gets_the_fixed_penalty_and_gates_multiply():
    assert synthesizer_reward(False, 1.0, 1.0, 0.5) == INVALID_REWARD == -0.5
    assert synthesizer_reward(True, 0.75, 0.9, 0.5) == pytest.approx(0.5 * 0.8)
