"""Security: a configured token guards every route. (An agent beyond loopback without one does not
start: tests/security/test_agent_exposure.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agent import AgentProcess

TOKEN = "s3cret-token"


def routes(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every operation of the OpenAPI document, its path parameters filled in."""
    return [(method.upper(), re.sub(r"\{[^}]+\}", "x", path))
            for path, operations in document["paths"].items() for method in operations]


@pytest.mark.slow
def test_every_route_needs_the_token(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path, token=TOKEN).start()
    try:
        with agent.http() as http:
            document = http.get("/v1/openapi.json").json()
            assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
            operations = [*routes(document), ("GET", "/v1/openapi.json"), ("GET", "/v1/nothing")]
            assert len(operations) >= 17
            for method, path in operations:
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                                {"Authorization": f"Basic {TOKEN}"}):
                    # Said to be JSON: a body of another type is refused before the token is looked at (415).
                    response = httpx.request(method, agent.url + path, content=b"{not json",
                                             headers={**headers, "Content-Type": "application/json"})
                    assert response.status_code == 401, (method, path, headers, response.text)
                    assert response.json()["error"].startswith("missing or wrong token")
                    assert response.headers["WWW-Authenticate"] == "Bearer"
                # (follow=false: the event stream would not end otherwise)
                assert http.request(method, path, content=b"{not json", params={"follow": "false"}).status_code != 401
            assert http.get("/v1/health").status_code == 200

        # The command line says what is wrong, without a traceback.
        wrong = agent.cli("job", "status", token="wrong")
        assert wrong.returncode == 1
        assert "refused" in wrong.stderr and "HERDER_TOKEN" in wrong.stderr and "Traceback" not in wrong.stderr
        assert agent.cli("job", "status").returncode == 0
    finally:
        agent.shutdown()
