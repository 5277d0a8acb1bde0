from django.apps import AppConfig


class ProfilingConfig(AppConfig):
    name = "profiling"
    verbose_name = "Profiling (the gate)"
