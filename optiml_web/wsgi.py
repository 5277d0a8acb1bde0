"""WSGI entry point, for hosts that serve plain HTTP only (no live updates)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")

application = get_wsgi_application()
