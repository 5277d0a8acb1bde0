"""Websocket routes of the lineage app (mounted by optiml_web/asgi.py)."""

from django.urls import path

from lineage.consumers import SkillCardConsumer
from optiml_web import params

params.register_converters()

websocket_urlpatterns = [
    path("ws/skills/<card:card_id>/", SkillCardConsumer.as_asgi()),
]
