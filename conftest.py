"""Root conftest: shared fixtures for every tier live in tests/support (a pytest plugin)."""

pytest_plugins = [
    "tests.support.kube",
    "tests.support.operator",
    "tests.support.harness",
    "tests.support.faults",
    "tests.faults.loaded",
]
