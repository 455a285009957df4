from collections import Counter

import pytest

from sws.config import EngineConfig
from sws.engines import Request, make_engine
from sws.errors import UserError
from sws.parsing import parse_concepts, parse_judgement, parse_problem
from sws.worlds.arith import CATEGORIES, DEFECT_KINDS, LEVELS, generate_problems, solve
from sws.worlds.arith.defects import inject_defect
from sws.worlds.arith.oracle import OracleEngine
from sws.worlds.arith.world import ORACLE
from sws.worlds.math.verifier import extract_answer

DRAWS = 2000
TOLERANCE = 0.04  # about four standard deviations of a rate near 0.3 over 2000 draws


def oracle(**options) -> OracleEngine:
    return OracleEngine(EngineConfig(**ORACLE, options=options))


# A concept set of each category that problems of it show at every level.
FEASIBLE = {"addition": ["addition with carrying", "place value"], "subtraction": ["borrowing from the tens"],
            "multiplication": ["multiplication table"], "remainders": ["divisibility"],
            "precedence": ["parentheses", "precedence trap"], "multi_step": ["running total"]}


def generate_requests(count: int) -> list[Request]:
    return [
        Request(prompt="(rendered generation prompt)", task="generate", seed=index, fields={
            "category": CATEGORIES[index % 6], "concepts": FEASIBLE[CATEGORIES[index % 6]],
            "level": LEVELS[index % 3],
        })
        for index in range(count)
    ]


def generated_kinds(engine: OracleEngine, count: int = DRAWS) -> Counter:
    completions = engine.generate(generate_requests(count))
    return Counter(solve(parse_problem(samples[0].text)).kind for samples in completions)


def test_without_noise_every_generated_problem_is_well_formed():
    assert generated_kinds(oracle(), 500) == Counter({"ok": 500})


@pytest.mark.parametrize("kind", DEFECT_KINDS)
def test_each_defect_knob_injects_that_defect_at_its_rate(kind):
    kinds = generated_kinds(oracle(**{kind: 0.3}))
    assert set(kinds) == {"ok", kind}
    assert kinds[kind] / DRAWS == pytest.approx(0.3, abs=TOLERANCE)


def test_defect_knobs_combine_with_at_most_one_defect_each():
    kinds = generated_kinds(oracle(**{kind: 0.1 for kind in DEFECT_KINDS}))
    for kind in DEFECT_KINDS:
        assert kinds[kind] / DRAWS == pytest.approx(0.1, abs=TOLERANCE)
    assert kinds["ok"] / DRAWS == pytest.approx(0.4, abs=TOLERANCE)


def test_variants_of_one_request_are_other_problems_with_the_same_concepts():
    fields = {"category": "subtraction", "concepts": ["subtraction", "borrowing"], "level": "medium"}
    requests = [Request(prompt="p", task="generate", seed=7, fields={**fields, "instance": instance})
                for instance in range(8)]
    problems = [parse_problem(samples[0].text) for samples in oracle().generate(requests)]
    assert len(set(problems)) >= 7
    assert all("subtraction" in solve(problem).concepts for problem in problems)


def test_generated_problems_follow_category_and_concepts():
    engine = oracle()
    requests = [Request(prompt="p", task="generate", seed=seed, fields={
        "category": "precedence", "concepts": ["parentheses", "order of operations"], "level": "medium"})
        for seed in range(50)]
    problems = [parse_problem(samples[0].text) for samples in engine.generate(requests)]
    assert all(solve(problem).category == "precedence" for problem in problems)
    assert all("parentheses" in solve(problem).concepts for problem in problems)
    carry = [Request(prompt="p", task="generate", seed=seed, fields={
        "category": "addition", "concepts": ["addition with carrying"], "level": "medium"}) for seed in range(50)]
    assert all("addition with carrying" in solve(parse_problem(s[0].text)).concepts for s in engine.generate(carry))


def rate_requests(problems: list[str]) -> list[Request]:
    return [Request(prompt="p", task="rate", seed=index, fields={"problem": problem})
            for index, problem in enumerate(problems)]


def judged(engine: OracleEngine, problems: list[str]) -> list[str]:
    judgements = [parse_judgement(samples[0].text) for samples in engine.generate(rate_requests(problems))]
    return [judgement.verdict if judgement else None for judgement in judgements]


@pytest.fixture(scope="module")
def good_and_bad_problems() -> tuple[list[str], list[str]]:
    import random

    rng = random.Random(0)
    good = [p.problem for p in generate_problems(DRAWS // 2, seed=5)]
    bad = [inject_defect(DEFECT_KINDS[i % 6], p, rng) for i, p in enumerate(generate_problems(DRAWS // 2, seed=6))]
    return good, bad


def test_exact_judge_rates_ok_problems_well_and_defective_ones_bad(good_and_bad_problems):
    good, bad = good_and_bad_problems
    good_verdicts = Counter(judged(oracle(), good))
    assert set(good_verdicts) == {"perfect", "acceptable"} and good_verdicts["perfect"] > good_verdicts["acceptable"]
    assert set(judged(oracle(), bad)) == {"bad"}


def test_judge_error_knob_makes_verdicts_wrong_at_its_rate(good_and_bad_problems):
    good, bad = good_and_bad_problems
    engine = oracle(judge_error=0.2)
    wrong = sum(verdict == "bad" for verdict in judged(engine, good))
    wrong += sum(verdict != "bad" for verdict in judged(engine, bad))
    assert wrong / DRAWS == pytest.approx(0.2, abs=TOLERANCE)


def test_labeler_error_knob_gives_wrong_integers_at_its_rate_independently_per_sample():
    problems = generate_problems(DRAWS // 8, seed=9)
    engine = oracle(labeler_error=0.3)
    requests = [Request(prompt="p", task="label", n=8, seed=i, fields={"problem": p.problem})
                for i, p in enumerate(problems)]
    completions = engine.generate(requests)
    answers = [[extract_answer(sample.text) for sample in samples] for samples in completions]
    assert all(answer is not None and answer.isdigit() for row in answers for answer in row)
    wrong = sum(answer != p.answer for p, row in zip(problems, answers, strict=True) for answer in row)
    assert wrong / DRAWS == pytest.approx(0.3, abs=TOLERANCE)
    majority_right = sum(Counter(row).most_common(1)[0][0] == p.answer for p, row in zip(problems, answers, strict=True))
    assert majority_right / len(problems) > 0.9


def test_exact_labeler_boxes_the_true_answer_after_its_steps():
    problems = generate_problems(120, seed=10)
    requests = [Request(prompt="p", task=task, fields={"problem": p.problem})
                for p in problems for task in ("label", "answer")]
    texts = [samples[0].text for samples in oracle().generate(requests)]
    assert [extract_answer(text) for text in texts] == [p.answer for p in problems for _ in range(2)]
    assert all("Step 1:" in text for text in texts)


def extract_requests(problems: list[str], k: int = 5) -> list[Request]:
    return [Request(prompt="p", task="extract", seed=i, fields={"problem": problem, "k": k})
            for i, problem in enumerate(problems)]


def test_extractor_lists_the_concepts_a_problem_shows_and_no_others_in_varied_formats():
    problems = generate_problems(60, seed=13)
    texts = [samples[0].text for samples in oracle().generate(extract_requests([p.problem for p in problems], 20))]
    for problem, text in zip(problems, texts, strict=True):
        assert set(parse_concepts(text)) == set(problem.concepts)
    assert any(text.lstrip().startswith("[") for text in texts)
    assert any("\n1. " in f"\n{text}" for text in texts)
    assert any("\n- " in f"\n{text}" or "\n* " in f"\n{text}" for text in texts)


@pytest.mark.parametrize(("problem", "concepts"), [
    ("Compute 23+14.", {"addition", "two-digit numbers", "place value"}),
    ("Compute 27+15.", {"addition", "addition with carrying", "carrying into the tens", "two-digit numbers",
                        "place value"}),
    ("Compute 58-23.", {"subtraction", "two-digit numbers", "place value"}),
    ("Compute 52-27.", {"subtraction", "subtraction with borrowing", "borrowing from the tens", "two-digit numbers",
                        "place value"}),
    ("Compute 7*8.", {"multiplication", "multiplication table", "smaller number first", "one-digit numbers"}),
    ("Compute 3+4*5.", {"order of operations", "addition", "multiplication", "multiplication table",
                        "smaller number first", "mixed operations", "one-digit numbers", "precedence trap"}),
])
def test_extractor_concepts_of_hand_checked_problems(problem: str, concepts: set[str]) -> None:
    text = oracle().generate(extract_requests([problem], 10))[0][0].text
    assert set(parse_concepts(text)) == concepts


def test_concept_error_drops_or_swaps_concepts_at_its_rate():
    problems = [p.problem for p in generate_problems(400, seed=5)]
    requests = extract_requests(problems, 10)
    clean = [set(parse_concepts(samples[0].text)) for samples in oracle().generate(requests)]
    noisy = [set(parse_concepts(samples[0].text)) for samples in oracle(concept_error=0.2).generate(requests)]
    listed = sum(len(concepts) for concepts in clean)
    kept = sum(len(truth & got) for truth, got in zip(clean, noisy, strict=True))
    assert 0.15 < 1 - kept / listed < 0.25
    assert all(got for got in noisy) and any(got - truth for truth, got in zip(clean, noisy, strict=True))


def test_completions_are_deterministic_per_seed_and_sample_index():
    requests = generate_requests(20)
    engine = oracle(ill_posed=0.5, seed=3)
    assert engine.generate(requests) == oracle(ill_posed=0.5, seed=3).generate(requests)
    assert engine.generate(requests) != oracle(ill_posed=0.5, seed=4).generate(requests)
    label = Request(prompt="p", task="label", n=16, fields={"problem": "Compute 47+85."})
    noisy = oracle(labeler_error=0.5)
    assert len({c.text for c in noisy.generate([label])[0]}) > 1
    greedy = Request(prompt="p", task="label", n=16, temperature=0.0, fields={"problem": "Compute 47+85."})
    assert len({c.text for c in noisy.generate([greedy])[0]}) == 1


def test_registry_builds_the_oracle_by_name():
    engine = make_engine(EngineConfig(**ORACLE))
    [[completion]] = engine.generate([Request(prompt="p", task="answer", fields={"problem": "Compute 7*8."})])
    assert extract_answer(completion.text) == "56" and completion.tokens > 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ilposed": 0.1}, "unknown oracle option 'ilposed'"),
        ({"proof": 1.5}, "between 0 and 1"),
        ({"proof": 0.6, "multi_part": 0.6}, "sum to 1.20"),
        ({"seed": "x"}, "set an integer"),
    ],
)
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        oracle(**options)


def test_a_task_the_oracle_cannot_play_is_a_user_error():
    with pytest.raises(UserError, match="cannot play task 'policy'"):
        oracle().generate([Request(prompt="p", task="policy")])


def label_request(n: int = 4, seed: int = 1) -> Request:
    return Request(prompt="(label prompt)", n=n, seed=seed, task="label", fields={"problem": "Compute 47+85."})


def test_the_cut_off_knob_truncates_completions_at_its_rate():
    samples = oracle(cut_off=0.3).generate([label_request(n=DRAWS)])[0]
    cut = [c for c in samples if c.truncated]
    assert abs(len(cut) / DRAWS - 0.3) < TOLERANCE


def test_the_run_on_knob_writes_a_solution_after_the_problem():
    completions = oracle(run_on=1.0).generate(generate_requests(200))
    texts = [samples[0].text for samples in completions]
    run_on = [text for text in texts if "\\boxed" in text or "result is" in text]
    assert len(run_on) >= 0.9 * len(texts)


def test_the_rubber_stamp_knob_gives_a_verdict_without_analysis():
    request = Request(prompt="(rate prompt)", n=DRAWS, seed=1, task="rate", fields={"problem": "Compute 3*4."})
    texts = [c.text for c in oracle(rubber_stamp=0.5).generate([request])[0]]
    assert abs(texts.count("Verdict: perfect") / DRAWS - 0.5) < TOLERANCE


def test_failure_knobs_leave_every_other_draw_unchanged():
    plain = oracle(labeler_error=0.3).generate([label_request(n=50)])[0]
    noisy = oracle(labeler_error=0.3, cut_off=0.5).generate([label_request(n=50)])[0]
    assert [a.text for a, b in zip(plain, noisy, strict=True) if not b.truncated] == \
        [b.text for b in noisy if not b.truncated]


def test_ignores_n_answers_one_completion_per_request():
    assert [len(samples) for samples in oracle(ignores_n=True).generate([label_request(n=4)])] == [1]


def categorize_requests(problems: list, categories: list[str]) -> list[Request]:
    return [Request(prompt="(rendered categorize prompt)", task="categorize", seed=index,
                    fields={"problem": problem.problem, "categories": categories})
            for index, problem in enumerate(problems)]


def test_the_oracle_categorizer_labels_every_problem_right_without_noise_and_some_wrong_with_it():
    from sws.categorize import parse_label

    problems = generate_problems(600, seed=3)
    categories = list(CATEGORIES)
    exact = oracle().generate(categorize_requests(problems, categories))
    assert [parse_label(samples[0].text, categories).category for samples in exact] == [p.category for p in problems]
    noisy = oracle(categorizer_error=0.3).generate(categorize_requests(problems, categories))
    wrong = sum(parse_label(samples[0].text, categories).category != p.category
                for samples, p in zip(noisy, problems, strict=True))
    assert abs(wrong / len(problems) - 0.3) < 0.07


def test_tokens_are_whitespace_words_and_a_request_bills_its_prompt_once():
    prompt = "Solve this problem:\n\nCompute 12 + 30."
    request = Request(messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}),
                      n=3, task="label", fields={"problem": "Compute 12 + 30."})
    [completions] = oracle().generate([request])
    assert [c.prompt_tokens for c in completions] == [2 + 7, 0, 0]
    assert all(c.tokens == len(c.text.split()) for c in completions)


def test_a_stop_string_ends_the_reply_as_a_server_ends_it():
    fields = {"category": "addition", "concepts": ["carrying"], "level": "easy"}
    [[plain]] = oracle().generate([Request(prompt="write", task="generate", fields=fields)])
    [[stopped]] = oracle().generate([Request(prompt="write", task="generate", fields=fields,
                                             stop=("never written", "with numbers chosen"))])
    assert stopped.text == plain.text.split("with numbers chosen")[0] and stopped.finish_reason == "stop"
    # a stop string before the point where a reply is cut off ends it first
    [[cut]] = oracle(cut_off=1.0).generate([Request(prompt="write", task="generate", fields=fields, stop=("problem",))])
    assert cut.finish_reason == "stop" and cut.text == plain.text.split("problem")[0]
