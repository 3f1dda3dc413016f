"""A bounded load: 50 running tasks, 100 concurrent clients polling status and following logs."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess

TASKS = 50
CLIENTS = 100
FOLLOWERS = 20
"""Of the clients, how many follow a log (the others poll allocation status)."""
SECONDS = 10.0


@pytest.mark.slow
def test_100_clients_against_50_running_tasks(agent: AgentProcess) -> None:
    allocs = [a["id"] for a in agent.submit(ticker("load", count=TASKS))["allocations"]]
    assert len(allocs) == TASKS
    for alloc_id in allocs:
        agent.wait_task(alloc_id, "t", timeout=60)

    errors: list[str] = []
    polls = [0] * CLIENTS
    followed: list[bytes] = []

    async def poll(index: int, http: httpx.AsyncClient, until: float) -> None:
        while time.monotonic() < until:
            alloc_id = allocs[(index + polls[index]) % TASKS]
            response = await http.get(f"/v1/allocations/{alloc_id}")
            if response.status_code != 200 or response.json()["tasks"]["t"]["state"] != "running":
                errors.append(f"{response.status_code} {response.text[:200]}")
            polls[index] += 1

    async def follow(index: int, http: httpx.AsyncClient, until: float) -> None:
        received = b""
        try:
            async with http.stream("GET", f"/v1/allocations/{allocs[index]}/logs/t",
                                   params={"follow": "true"}) as response:
                if response.status_code != 200:
                    errors.append(f"follow: {response.status_code}")
                    return
                async with asyncio.timeout(until - time.monotonic()):
                    async for chunk in response.aiter_bytes():
                        received += chunk
        except TimeoutError:
            pass  # followed for the whole run, as a client would
        followed.append(received)

    async def main() -> None:
        limits = httpx.Limits(max_connections=CLIENTS + 10)
        async with httpx.AsyncClient(base_url=agent.url, headers=agent.headers, timeout=30.0, limits=limits) as http:
            until = time.monotonic() + SECONDS
            await asyncio.gather(*(follow(i, http, until) for i in range(FOLLOWERS)),
                                 *(poll(i, http, until) for i in range(FOLLOWERS, CLIENTS)))

    asyncio.run(main())
    assert not errors, errors[:5]
    assert all(polls[FOLLOWERS:]), "every polling client got answers"
    assert followed == [b"started\n"] * FOLLOWERS
