"""A run's input cache (several GB for a 1 GB task) lives as long as the run can use it."""

import pytest

from search import input_caches
from search.models import Run

pytestmark = pytest.mark.django_db


def cache_of(root, run_id: int, task: str = "relu"):
    folder = root / task / f"run-{run_id}"
    folder.mkdir(parents=True)
    (folder / "x.npy").write_bytes(b"\0" * 1024)
    return folder


def test_ended_runs_lose_their_input_caches_and_live_ones_keep_them(tmp_path, relu_run):
    running = relu_run(drive=False)
    paused = relu_run(drive=False)
    Run.objects.filter(pk=paused.pk).update(status=Run.Status.PAUSED)
    finished = relu_run(drive=False)
    Run.objects.filter(pk=finished.pk).update(status=Run.Status.FINISHED)
    folders = {name: cache_of(tmp_path, run.pk) for name, run in
               (("running", running), ("paused", paused), ("finished", finished))}
    folders["deleted run"] = cache_of(tmp_path, 10**9)
    other = tmp_path / "relu" / "not-a-run-folder"
    other.mkdir()

    deleted = input_caches.run_input_caches_sweep(root=tmp_path)

    assert sorted(deleted) == sorted([folders["finished"], folders["deleted run"]])
    assert folders["running"].is_dir() and folders["paused"].is_dir() and other.is_dir()
    assert not folders["finished"].exists()


def test_a_missing_root_is_nothing_to_sweep(tmp_path):
    assert input_caches.run_input_caches_sweep(root=tmp_path / "absent") == []
