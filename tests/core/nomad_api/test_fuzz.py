"""Property-based fuzzing of the Nomad-compatible API's OpenAPI document (the served subset):
no request, however malformed, gets a 500, and every answer matches what the document says."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.core.nomad_api.conftest import NomadAgent

EXAMPLES = 20
"""Per operation: enough to find what a 500 hides, few enough to run in seconds."""


@pytest.mark.slow
def test_no_operation_fails_or_strays_from_its_schema(nomad_agent: NomadAgent, seed: int) -> None:
    headers = {"X-Nomad-Token": nomad_agent.token} if nomad_agent.token else {}
    schema = schemathesis.openapi.from_url(f"{nomad_agent.nomad_url}/v1/nomad-openapi.json", headers=headers)
    # The log streams (a task's, the agent's) are sequences of JSON frames, not one document: their hostile
    # inputs are tests/security/test_nomad_api.py's.
    operations = [op for result in schema.get_all_operations()
                  if not (op := result.ok()).path.startswith(("/v1/client/fs/logs/", "/v1/agent/monitor"))]
    assert len(operations) >= 35
    for operation in operations:
        # Not schemathesis.pytest: its fixture support does not run under pytest 9.
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @hypothesis.seed(seed)  # the test's seed: its output says how to replay the same examples
        def fuzz(case: schemathesis.Case) -> None:
            if case.query and "index" in case.query:
                case.query = {**case.query, "wait": "1ms"}  # a blocking query would wait its 5 minutes
            case.call_and_validate(base_url=nomad_agent.nomad_url, headers=headers, timeout=30,
                                   checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                           response_schema_conformance])

        fuzz()
