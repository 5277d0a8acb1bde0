"""Websocket routes of the search app (mounted by optiml_web/asgi.py). `<id:...>` takes a
whole number as the HTTP routes do (optiml_web.params.IdConverter: no leading 0, no id
past a database's), so /ws/runs/007/ names no run, as /api/runs/007/ does not; a path
these patterns do not take falls to optiml_web.sockets.catch_all and is refused."""

from django.urls import path

from optiml_web import params
from search.consumers import RunConsumer

params.register_converters()

websocket_urlpatterns = [
    path("ws/runs/<id:run_id>/", RunConsumer.as_asgi()),
]
