"""The suite keeps apart from the app's own state (issue 35, item 11; tests/isolation.py):
a task declared in the browser lands in the app's task folder, and the tests, which once
listed it among the suite's tasks, must not see it; nor may they use the app's database
or its secret key."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from profiling.harness import declared
from profiling.harness import tasks as task_registry


def _probe_definition(slug: str) -> dict:
    definition, _ = declared.declare({
        "name": slug, "description": "written by the suite to check it never reads this folder",
        "sizes": {"n": 1024}, "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}], "reference": {"y": "x"}})
    return definition


def _missing_folders(folder: Path) -> list[Path]:
    """The folder and those of its parents that do not exist yet, deepest first."""
    return [path for path in (folder, *folder.parents) if not path.exists()]


def test_a_task_declared_in_the_apps_own_folder_is_not_a_task_the_tests_see(isolation):
    folder = isolation.app_task_dir
    made = _missing_folders(folder)  # removed afterwards; nothing that was there is touched
    folder.mkdir(parents=True, exist_ok=True)
    slug = f"isolation-probe-{uuid.uuid4().hex[:12]}"
    path = folder / f"{declared.NAME_PREFIX}{slug}.json"
    assert not path.exists()
    try:
        path = declared.write_definition(_probe_definition(slug), folder)
        name = path.stem
        assert declared.load_file(path).name == name  # a task the app's registry lists

        task_registry._reset_for_tests()  # what a fresh test process would find
        assert name not in [task.name for task in task_registry.all_tasks()]
        with pytest.raises(task_registry.UnknownTask):
            task_registry.get(name)
    finally:
        path.unlink(missing_ok=True)
        for made_folder in made:
            made_folder.rmdir()
        task_registry._reset_for_tests()


def test_the_settings_and_the_task_path_name_the_suites_folder_not_the_apps(isolation):
    task_dir, workdir = settings.OPTIML_TASK_DIR, settings.OPTIML_WORKDIR
    assert task_dir == isolation.task_dir and task_dir.is_dir()
    assert os.environ["OPTIML_TASK_PATH"] == str(isolation.task_dir)
    assert os.environ["OPTIML_VAR_DIR"] == str(isolation.var_dir)
    assert isolation.var_dir != isolation.app_var_dir
    in_the_apps = [name for name in dir(settings) if name.isupper()
                   and isinstance(getattr(settings, name), Path)
                   and getattr(settings, name).is_relative_to(isolation.app_var_dir)]
    assert in_the_apps == []
    assert workdir == isolation.var_dir / "work"


def test_without_redis_the_suites_celery_messages_are_files_in_its_own_folder(isolation):
    from optiml_web.celery import app

    if settings.CELERY_BROKER_URL != "filesystem://":
        pytest.skip("REDIS_URL is set: messages go through Redis")
    options = app.conf.broker_transport_options
    keys = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
    folders = [options[key] for key in keys]
    assert all(Path(folder).is_relative_to(isolation.var_dir) for folder in folders), folders


def _secret_key_under_the_suites_settings(request: pytest.FixtureRequest, app_var_dir: Path) -> str:
    """SECRET_KEY in a fresh process that loads the settings as pytest-django does (the
    ini's module) for an app whose var/ is `app_var_dir`."""
    env = {name: value for name, value in os.environ.items()
           if name not in {"OPTIML_SECRET_KEY", "OPTIML_SECRET_KEY_FILE"}}
    env.update(OPTIML_VAR_DIR=str(app_var_dir),
               DJANGO_SETTINGS_MODULE=request.config.getini("DJANGO_SETTINGS_MODULE"))
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    finished = subprocess.run([sys.executable, "-c", code], cwd=request.config.rootpath, env=env,
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    return finished.stdout.strip()


def test_the_suite_neither_reads_the_apps_secret_key_nor_leaves_one_in_its_var(request, tmp_path):
    app_var_dir = tmp_path / "app-var"
    app_var_dir.mkdir()

    _secret_key_under_the_suites_settings(request, app_var_dir)
    assert not (app_var_dir / "secret_key").exists()  # the app makes its own on its first start

    (app_var_dir / "secret_key").write_text("the-apps-own-key")
    assert _secret_key_under_the_suites_settings(request, app_var_dir) != "the-apps-own-key"
    assert settings.SECRET_KEY.startswith("optiml-tests-")


@pytest.mark.django_db
def test_the_tests_have_a_database_of_their_own():
    name = connection.settings_dict["NAME"]

    # pytest-django's: test_<name> on PostgreSQL, a shared in-memory one on SQLite.
    assert name.startswith("test_") or connection.creation.is_in_memory_db(name), name
