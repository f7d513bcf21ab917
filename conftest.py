"""Root conftest: shared fixtures for every tier live in tests/support (a pytest plugin).

Property tests draw the same examples on every run (`derandomize`): CI on a fresh clone must
pass or fail on the code, not on what a random draw happened to reach; a test's examples still
differ from every other test's. `HYPOTHESIS_PROFILE=explore` draws fresh random examples (a
thousand where a test does not set its own count) to look for new failures; a failure found
that way becomes a test of its own.
"""

import os

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", max_examples=1000, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

pytest_plugins = [
    "tests.support.kube",
    "tests.support.operator",
    "tests.support.harness",
    "tests.support.faults",
    "tests.faults.loaded",
]
