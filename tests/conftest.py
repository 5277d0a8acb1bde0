"""For every test: a var/ of the suite's own, never the app's (tests/isolation.py).

Free of Django: the GPU host runs `pytest -p no:django tests/gpu tests/harness`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.isolation import Isolation, isolate

ISOLATION = pytest.StashKey[Isolation]()


def pytest_configure(config: pytest.Config) -> None:
    # Here, not in a fixture: test modules read the task registry when they are collected.
    folder = Path(tempfile.mkdtemp(prefix="optiml-tests-"))
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    config.stash[ISOLATION] = isolate(folder / "var")


@pytest.fixture
def isolation(request: pytest.FixtureRequest) -> Isolation:
    """Where the suite keeps its state, and where the app keeps its own."""
    return request.config.stash[ISOLATION]
