from django.apps import AppConfig


class ProfilingConfig(AppConfig):
    name = "profiling"
    verbose_name = "Profiling (the gate)"

    def ready(self) -> None:
        # Every Django process (web, Celery worker, manage.py) knows the declared tasks,
        # and so do the gate subprocesses it starts: they inherit OPTIML_TASK_PATH.
        from pathlib import Path

        from django.conf import settings

        from profiling.harness import tasks

        directory = Path(settings.OPTIML_TASK_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        tasks.add_directory(directory)
