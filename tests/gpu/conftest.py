"""GPU tests: they run on a host with an NVIDIA GPU and pycuda, and skip elsewhere."""

import pytest

from profiling.harness.gate import gpu_name


def pytest_collection_modifyitems(config, items):
    if gpu_name() is not None:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with pycuda (run `pytest -m gpu` on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
