"""How the project hangs together: pure cores free of Django, the ASGI app, settings
that refuse to start production without a secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Blocks Django and Celery as if they were not installed, as on the GPU host.
WITHOUT_DJANGO = (
    "import sys\n"
    "for name in ('django', 'celery', 'rest_framework', 'channels'):\n"
    "    sys.modules[name] = None\n"
)


def run_python(code: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **environment},
    )


def test_the_pure_cores_import_on_a_host_without_django_or_celery():
    finished = run_python(
        WITHOUT_DJANGO
        + "import profiling, search, lineage\n"
        + "import profiling.harness, profiling.harness.gate, profiling.harness.tasks\n"
        + "import profiling.harness.report, profiling.harness.candidate\n"
        + "print(len(profiling.harness.tasks.all_tasks()))\n"
    )

    assert finished.returncode == 0, finished.stderr
    assert int(finished.stdout) >= 1


def test_the_asgi_application_routes_http_and_websockets():
    from channels.routing import ProtocolTypeRouter

    from optiml_web.asgi import application

    assert isinstance(application, ProtocolTypeRouter)
    assert set(application.application_mapping) == {"http", "websocket"}


def test_production_settings_without_a_secret_key_refuse_to_start(tmp_path):
    finished = run_python(
        "import django; django.setup()",
        DJANGO_SETTINGS_MODULE="optiml_web.settings",
        OPTIML_DEBUG="false",
        OPTIML_SECRET_KEY="",
        OPTIML_VAR_DIR=str(tmp_path),
    )

    assert finished.returncode != 0
    assert "ImproperlyConfigured: OPTIML_SECRET_KEY" in finished.stderr


def test_settings_use_postgresql_when_database_url_is_set(tmp_path):
    finished = run_python(
        "from django.conf import settings; d = settings.DATABASES['default'];"
        " print(d['ENGINE'], d['HOST'], d['NAME'])",
        DJANGO_SETTINGS_MODULE="optiml_web.settings",
        DATABASE_URL="postgres://optiml@db.example:5432/studio",
        OPTIML_VAR_DIR=str(tmp_path),
    )

    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["django.db.backends.postgresql", "db.example", "studio"]


def test_the_env_example_lists_every_variable_the_settings_read():
    import re

    read = set()
    for module in (REPO / "optiml_web").glob("*.py"):
        read |= set(re.findall(r'env_(?:str|bool|int|float|rate|secret)\(\s*"([A-Z_]+)"', module.read_text()))
    listed = set(re.findall(r"^([A-Z_]+)=", (REPO / "docker" / ".env.example").read_text(), re.M))

    assert read, "no env_* calls found: has the settings module moved?"
    assert read - listed == set()
