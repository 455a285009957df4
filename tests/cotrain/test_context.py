from sws.cotrain.context import UNLISTED, Ledger, build_context

CATEGORIES = ["addition", "multiplication"]


def _ledger() -> Ledger:
    ledger = Ledger()
    ledger.record_step({"addition": 0.5, "multiplication": 0.1}, ["carry"], ["addition"], ["duplicate"], 4)
    return ledger


def test_context_hash_changes_when_the_ledger_changes():
    ledger = _ledger()
    before = build_context(ledger, CATEGORIES).digest()
    assert build_context(ledger, CATEGORIES).digest() == before
    ledger.record_step({"addition": 0.6, "multiplication": 0.1}, [], ["addition"], [], 2)
    assert build_context(ledger, CATEGORIES).digest() != before


def test_context_reports_measured_accuracy_slope_and_reasons():
    ledger = _ledger()
    ledger.record_step({"addition": 0.7, "multiplication": 0.1}, ["carry", "borrow"], [], ["too_short"], 2)
    context = build_context(ledger, CATEGORIES)
    assert context.accuracy == {"addition": 0.7, "multiplication": 0.1}
    assert context.slope["addition"] > 0 and context.slope["multiplication"] == 0
    assert context.unsolved_concepts[0] == "carry"
    assert context.valid_rate == round(1 / 6, 4) and context.duplicate_rate == round(1 / 6, 4)
    assert context.render().startswith("weak: multiplication=0.1 addition=0.7")


def test_ledger_survives_json():
    ledger = _ledger()
    restored = Ledger.from_json(ledger.to_json())
    assert build_context(restored, CATEGORIES) == build_context(ledger, CATEGORIES)


def test_uncategorised_tasks_are_counted_as_valid_but_never_shown_as_a_category():
    ledger = Ledger()
    ledger.record_step({"addition": 0.5, UNLISTED: 0.0}, [], ["addition", UNLISTED], [], 2)
    context = build_context(ledger, ["addition"])
    assert context.valid_rate == 1.0
    assert set(context.accuracy) == set(context.accepted_per_category) == {"addition"}
    assert UNLISTED not in context.render()
