"""The settings the suite runs under (pyproject.toml's DJANGO_SETTINGS_MODULE): the app's
own, with a secret key made for this run (issue 35, item 11).

The app's settings read var/secret_key, and write one there when there is none, as they
are imported; pytest-django imports them before any conftest runs, so tests/isolation.py
comes too late for the key (it moves the paths). Here the key is in the environment
first: the suite never reads the app's key nor leaves one in its var/, and the processes
the tests start inherit the suite's key with its var/ (tests/isolation.py).
"""

import os
import secrets

os.environ["OPTIML_SECRET_KEY"] = f"optiml-tests-{secrets.token_urlsafe(32)}"
os.environ.pop("OPTIML_SECRET_KEY_FILE", None)
# The web tests' searches and skill sources see the library's stored cards alone, as they
# were written to, here and in the app's processes they start (which inherit this);
# tests/web/test_skeletons_in_app.py turns the skeleton cards on.
os.environ["OPTIML_SKELETON_CARDS"] = "false"

from optiml_web.settings import *  # noqa: E402, F403
