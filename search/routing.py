"""Websocket routes of the search app (mounted by optiml_web/asgi.py)."""

from django.urls import path

from search.consumers import RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
]
