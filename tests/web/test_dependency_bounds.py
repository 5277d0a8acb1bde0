"""What a fresh install gets for the live path (worker -> Redis -> web -> browser) is what
the project was tested with: each of its dependencies bounded below and above in
pyproject.toml, and the versions installed here within every bound declared.

An unbounded redis-py once moved to a major whose 5 s default socket read timeout cut
every idle live viewer (issue 34, part 2)."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# The web process (Django, DRF, channels, daphne and its websocket server), the channel
# layer and its Redis client, the worker (Celery and its transport) and the database driver.
LIVE_PATH = ["django", "djangorestframework", "channels", "channels-redis", "redis", "daphne", "asgiref",
             "autobahn", "twisted", "celery", "kombu", "psycopg", "whitenoise"]


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    return {canonicalize_name(req.name): req for req in map(Requirement, project["dependencies"])}


@pytest.mark.parametrize("name", LIVE_PATH)
def test_each_dependency_of_the_live_path_is_bounded_below_and_above(name):
    requirement = _requirements().get(name)

    assert requirement is not None, f"{name} is not a declared dependency"
    operators = {spec.operator for spec in requirement.specifier}
    assert operators & {">=", ">", "~=", "=="}, f"{requirement}: no lower bound"
    assert operators & {"<", "<=", "~=", "=="}, f"{requirement}: no upper bound"


def test_the_installed_versions_are_within_every_declared_bound():
    outside = []
    for name, requirement in _requirements().items():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = version(name)
        except PackageNotFoundError:
            outside.append(f"{requirement}: not installed")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            outside.append(f"{requirement}: {installed} installed")

    assert outside == []
