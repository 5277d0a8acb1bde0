from django.apps import AppConfig


class LineageConfig(AppConfig):
    name = "lineage"
