from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "search"

    def ready(self) -> None:
        from search import socket_access

        socket_access.connect_receivers()
