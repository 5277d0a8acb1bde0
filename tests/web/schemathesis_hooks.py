"""Hooks for schemathesis's command line in test_api_all_checks.py (loaded through its
config file's `hooks`).

One rule of the service is no schema's to state: JSON the database cannot store is
refused whole, whatever the operation (optiml_web.limits.unstorable: NUL or a lone
surrogate in any text or key, nesting past MAX_JSON_DEPTH, numbers past a float). A
request that is schema-valid but unstorable is thus refused with a 400 naming where, and
that refusal is right. Only that failure is set aside, and only after checking, with the
service's own function, that the body sent really is unstorable; every other failure of
every check stands.
"""

from __future__ import annotations

import os

import django
import schemathesis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")
django.setup()

from optiml_web.limits import unstorable  # noqa: E402  (Django set up first)


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """False (set aside) for a schema-valid body refused because it cannot be stored."""
    refused_as_unstorable = (getattr(failure, "code", "") == "ST202" and response.status_code == 400
                             and isinstance(case.body, dict | list) and unstorable(case.body) is not None)
    return not refused_as_unstorable
