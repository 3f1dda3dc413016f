"""Property-based fuzzing of every operation in the agent's OpenAPI document:
no request, however malformed, gets a 500, and every answer matches the schema."""

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

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess

EXAMPLES = 30
"""Per operation: enough to find what a 500 hides, few enough to run in seconds."""

SAFE_COMMAND = ["true"]
"""What the fuzzed exec requests run: a generated command would run on this host."""


@pytest.mark.slow
def test_no_operation_fails_or_strays_from_its_schema(shared_agent: AgentProcess, seed: int) -> None:
    # A running job, so that generated allocation IDs and prefixes can find one.
    shared_agent.submit(ticker("fuzzed", count=2))
    schema = schemathesis.openapi.from_url(f"{shared_agent.url}/v1/openapi.json", headers=shared_agent.headers)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    for operation in operations:
        # Not schemathesis.pytest: its fixture support does not run under pytest 9.
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @hypothesis.seed(seed)  # the test's seed: its output says how to replay the same examples
        def fuzz(case: schemathesis.Case) -> None:
            if case.path.endswith("/logs/{task}") or case.path == "/v1/events":
                case.query = {**(case.query or {}), "follow": "false"}  # an endless stream is no answer to check
            if case.path.endswith("/exec") and isinstance(case.body, dict) and "command" in case.body:
                case.body["command"] = SAFE_COMMAND
            case.call_and_validate(base_url=shared_agent.url, headers=shared_agent.headers, timeout=30,
                                   checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                                           response_schema_conformance])

        fuzz()
