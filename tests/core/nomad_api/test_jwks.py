"""The Nomad-compatible listener serves the workload identities' key set where Nomad does, without a token."""

from __future__ import annotations

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent

pytestmark = pytest.mark.slow


def test_the_key_set_is_served_without_a_token_and_nothing_else_is(nomad_agent: NomadAgent) -> None:
    served = httpx.get(f"{nomad_agent.nomad_url}/.well-known/jwks.json")
    assert served.status_code == 200, served.text
    (key,) = served.json()["keys"]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and key["use"] == "sig" and key["kid"]
    with nomad_agent.http() as http:  # the agent's own listener serves the same keys
        assert http.get("/.well-known/jwks.json").json() == served.json()
    assert httpx.put(f"{nomad_agent.nomad_url}/.well-known/jwks.json").status_code == 403
    assert httpx.get(f"{nomad_agent.nomad_url}/v1/jobs").status_code == 403
