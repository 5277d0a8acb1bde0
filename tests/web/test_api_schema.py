"""The OpenAPI schema describes every path the pages use; Swagger UI serves without a CDN."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

PATHS = [
    "/api/me/", "/api/tasks/", "/api/tasks/declared/", "/api/tasks/declared/{name}/", "/api/sources/",
    "/api/kernels/write/", "/api/kernels/write/{job_id}/",
    "/api/runs/", "/api/runs/import/",
    "/api/runs/{run_id}/", "/api/runs/{run_id}/nodes/", "/api/runs/{run_id}/nodes/{node_id}/",
    "/api/runs/{run_id}/nodes/{node_id}/ncu-report/", "/api/runs/{run_id}/pause/",
    "/api/runs/{run_id}/resume/", "/api/runs/{run_id}/stop/", "/api/runs/{run_id}/events/",
    "/api/runs/{run_id}/shares/", "/api/runs/{run_id}/shares/{share_id}/",
    "/api/runs/{run_id}/export/", "/api/runs/{run_id}/nodes.csv", "/api/runs/{run_id}/nodes.json",
    "/api/shared/{token}/", "/api/shared/{token}/nodes/{node_id}/",
    "/api/shared/{token}/nodes.csv", "/api/shared/{token}/nodes.json",
    "/api/shared/{token}/events/", "/api/teams/{team_id}/invitations/",
    "/api/teams/{team_id}/invitations/{invitation_id}/",
]


def test_the_schema_lists_every_path_of_the_contract(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert set(PATHS) <= set(schema["paths"])
    created = schema["components"]["schemas"]["RunCreate"]["properties"]
    assert {"task", "source", "plan", "budget", "judge", "seed", "sources", "team", "screen"} <= set(created)
    node = schema["components"]["schemas"]["NodeDetail"]["properties"]
    assert {"diff_vs_root", "roofline", "correctness", "compile", "ncu_report_url"} <= set(node)


def test_the_schema_generates_without_warnings():
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator

    GENERATOR_STATS.reset()
    SchemaGenerator().get_schema(request=None, public=True)

    assert not GENERATOR_STATS._warn_cache and not GENERATOR_STATS._error_cache


def test_swagger_ui_loads_its_files_from_this_server(client):
    page = client.get("/api/docs/").content.decode()

    assert "swagger-ui" in page and "cdn" not in page.lower()


def _operations(client) -> dict[tuple[str, str], dict]:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    return {(method.upper(), path): operation for path, operations in schema["paths"].items()
            for method, operation in operations.items()}


def test_every_operation_documents_the_errors_it_can_answer(client):
    for (method, path), operation in _operations(client).items():
        documented = set(operation["responses"])
        signed_out_allowed = path.startswith("/api/shared/")
        assert ("401" in documented) is not signed_out_allowed, (method, path)
        if "{" in path:
            assert "404" in documented, (method, path)
        if "requestBody" in operation:
            assert {"400", "403", "413", "415"} <= documented, (method, path)
        if any(p["in"] == "query" for p in operation.get("parameters", [])):
            assert "400" in documented, (method, path)
        for code in documented - {"200", "201", "204"}:
            content = operation["responses"][code].get("content", {})
            assert "application/json" in content and operation["responses"][code]["description"], (code, path)


def test_ids_and_numbers_in_paths_and_queries_say_their_bounds(client):
    operations = _operations(client)

    events = operations[("GET", "/api/runs/{run_id}/events/")]["parameters"]
    bounds = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    assert {p["name"]: p["schema"] for p in events} == {"after": bounds, "run_id": bounds}
    statuses = {p["name"]: p["schema"] for p in operations[("GET", "/api/runs/")]["parameters"]}
    assert statuses["status"]["enum"] == ["failed", "finished", "paused", "running", "stopped"]
