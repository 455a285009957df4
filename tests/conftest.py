"""Settings shared by every test."""

import os

from hypothesis import settings

# CI (`.ci/run` sets CI=1) replays the same generated inputs every run; a developer's runs keep drawing new ones.
settings.register_profile("ci", derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
