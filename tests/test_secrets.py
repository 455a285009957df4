from sws.engines.base import Completion
from sws.secrets import REDACTED, redact, redact_completions, remember_secret


def test_known_secrets_are_redacted_longest_first_and_placeholders_are_no_secrets():
    remember_secret("sk-short-key-1")
    remember_secret("sk-short-key-1-and-more")
    remember_secret("EMPTY")
    assert redact("a sk-short-key-1-and-more b sk-short-key-1 EMPTY") == f"a {REDACTED} b {REDACTED} EMPTY"


def test_completions_keep_everything_but_the_secret():
    remember_secret("sk-completion-key")
    [completion] = redact_completions([Completion("echo sk-completion-key", 7, "length", 3)])
    assert completion == Completion(f"echo {REDACTED}", 7, "length", 3)
