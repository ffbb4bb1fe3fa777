"""pytest plugin: `--revert-pr`, a header naming active reverts, and `@pytest.mark.guards_pr`."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register the guards_pr marker so --strict-markers accepts it."""
    config.addinivalue_line(
        "markers",
        "guards_pr(pr, expect=None, subprocess=False): the test must fail with PR `pr` reverted",
    )
