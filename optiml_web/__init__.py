# Load the Celery app whenever Django starts, so that @shared_task in the apps binds to it
# (and to its broker) rather than to Celery's default app. Only Django imports this
# package: the pure cores (profiling.harness, search.engine, lineage.engine) never do,
# so a GPU host without Django or Celery can still import them.
from .celery import app as celery_app

__all__ = ("celery_app",)
