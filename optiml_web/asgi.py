"""ASGI entry point: HTTP through Django; websockets (live run views, live skill cards)
routed by Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")
# Set up Django (and its app registry) before anything imports models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from lineage.routing import websocket_urlpatterns as lineage_sockets  # noqa: E402
from optiml_web.socket_reads import AuthMiddlewareStack  # noqa: E402
from optiml_web.sockets import catch_all  # noqa: E402
from search.routing import websocket_urlpatterns as search_sockets  # noqa: E402

websocket_urlpatterns = [*search_sockets, *lineage_sockets, *catch_all]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
