"""An API operation refuses query parameters it does not document.

A view reads the parameters it knows (optiml_web.params) and used to pass over any
other: `?sort=name` on a list that does not sort, or a misspelt `?stauts=running`, came
back as if the client had been understood. Here the rule is one, for every operation:
the query parameters it takes are those the OpenAPI schema documents for it
(@extend_schema(parameters=...), read by drf-spectacular as /api/schema/ serves them),
and a request with any other is a 400 naming each, before the view runs. So the schema
cannot say less than the service takes, nor the service take more than the schema says.

Views outside the schema (the schema and its docs pages themselves) are left alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.http import HttpRequest, JsonResponse
from rest_framework import status


class UndocumentedQueryMiddleware:
    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Callable, view_args, view_kwargs):
        if not request.GET or not request.path_info.startswith("/api/"):
            return None
        method = "GET" if request.method == "HEAD" else request.method
        taken = documented_query_parameters().get((view_func, method))
        if taken is None:  # not an operation of the schema: DRF answers (405, say)
            return None
        unknown = sorted(set(request.GET) - taken)
        if not unknown:
            return None
        takes = f"it takes {', '.join(sorted(taken))}" if taken else "it takes none"
        return JsonResponse({name: [f"not a query parameter of this operation; {takes}"] for name in unknown},
                            status=status.HTTP_400_BAD_REQUEST)


@functools.cache
def documented_query_parameters() -> dict[tuple[Callable, str], frozenset[str]]:
    """(view callable, HTTP method) -> the names of the query parameters the schema
    documents for that operation. Built once per process, at the first request that has
    a query string (the schema takes about a third of a second to generate)."""
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator()
    paths = generator.get_schema(request=None, public=True)["paths"]
    documented = {}
    for path, _path_regex, method, callback in generator.endpoints:
        operation = paths.get(path, {}).get(method.lower())
        if operation is not None:
            parameters = operation.get("parameters", [])
            documented[(callback, method)] = frozenset(p["name"] for p in parameters if p["in"] == "query")
    return documented
