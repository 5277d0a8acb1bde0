from django.core.management.base import BaseCommand

from profiling.services import tasks_sync


class Command(BaseCommand):
    help = "Copy the harness's task registry (and each task's naive kernel) into the database."

    def handle(self, *args, **options) -> None:
        tasks = tasks_sync()
        self.stdout.write(f"synced {len(tasks)} tasks: {', '.join(t.name for t in tasks)}")
