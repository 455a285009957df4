import pytest

from sws.worlds.arith import solve


@pytest.mark.parametrize(
    ("text", "answer", "category"),
    [
        ("Compute 47+85.", "132", "addition"),
        ("Compute 21+86+59.", "166", "addition"),
        ("Compute 85-47.", "38", "subtraction"),
        ("Compute 7*42.", "294", "multiplication"),
        ("Compute 55 mod 7.", "6", "remainders"),
        ("What is the remainder when 47 is divided by 5?", "2", "remainders"),
        ("Compute 3+4*5.", "23", "precedence"),
        ("Compute (3+4)*5.", "35", "precedence"),
        ("Compute 20+18-19+10.", "29", "multi_step"),
        ("What is 99-(13+7)?", "79", "multi_step"),
    ],
)
def test_well_formed_problems_are_solved(text, answer, category):
    truth = solve(text)
    assert (truth.kind, truth.answer, truth.category) == ("ok", answer, category)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Compute 47+x.", "ill_posed"),
        ("Compute 47 mod 0.", "ill_posed"),
        ("Compute 47+85 plus some number.", "ill_posed"),
        ("Compute 7.", "ill_posed"),
        ("", "ill_posed"),
        ("Compute 4+5. Then compute 6*7.", "multi_part"),
        ("(a) Compute 4+5. (b) Compute 6*7.", "multi_part"),
        ("Compute 4+5 and 6*7.", "multi_part"),
        ("Compute 47+85. Options: (A) 132 (B) 122 (C) 131 (D) 142", "multiple_choice"),
        ("Compute 47+85. Choose one: (A) 132, (B) 122.", "multiple_choice"),
        ("Prove that 47+85 = 132.", "proof"),
        ("Show that 4*5 is even.", "proof"),
        ("True or false: 47+85 = 132.", "true_false"),
        ("Is it true that 4*5 = 21?", "true_false"),
        ("Compute 47+85. The answer is 132.", "answer_leak"),
        ("Compute 47+85 = 132.", "answer_leak"),
        ("Compute 47+85. (Hint: the result is 132.)", "answer_leak"),
    ],
)
def test_defects_are_recognised_from_the_text(text, kind):
    assert solve(text).kind == kind


def test_defective_problems_keep_what_a_solver_would_answer():
    assert solve("Compute 47+85. Options: (A) 132 (B) 122").answer == "132"
    assert solve("Compute 4+5. Then compute 6*7.").answer == "9"
    assert solve("True or false: 47+85 = 131.").answer == "False"
    assert solve("Is it true that 4*5 is even?").answer == "True"
    assert solve("Prove that 47+85 = 132.").answer is None
    assert solve("Compute 47+x.").answer is None


def test_concepts_reflect_the_features_of_the_numbers():
    assert "addition with carrying" in solve("Compute 47+85.").concepts
    assert "addition with carrying" not in solve("Compute 41+35.").concepts
    assert "subtraction with borrowing" in solve("Compute 52-17.").concepts
    assert "parentheses" in solve("Compute (3+4)*5.").concepts
    assert "divisibility" in solve("Compute 56 mod 7.").concepts
