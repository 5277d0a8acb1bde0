"""`manage.py runserver` (what `make start` runs): daphne's, with the server of the image's
daphne (optiml_web/daphne.py), so the development server answers a handshake the app
refuses with the status the app chose (a path no app routes: 400, issue 34) as the image
does, instead of daphne's 403 for every refusal. This app is listed before daphne in
INSTALLED_APPS, so this command is the one Django finds."""

from __future__ import annotations

from daphne.management.commands.runserver import Command as DaphneRunserver

from optiml_web.daphne import DenyingServer


class Command(DaphneRunserver):
    server_cls = DenyingServer
