"""The agent's own service (``herder-client``), registered where the tasks' services are,
with a TTL check it passes itself."""

from __future__ import annotations

from herder.client.client import Client
from herder.services import PASSING, CheckRegistration, CheckStatus, ServiceRegistration

SELF_SERVICE = "herder-client"
SELF_OWNER = "agent"
SELF_CHECK_INTERVAL = 10.0
"""How often the agent passes its own check."""
SELF_CHECK_TTL = 3 * SELF_CHECK_INTERVAL
"""How long the check stays passing without a heartbeat: two may be missed under load."""


class SelfService:
    """The agent's registration as a service of ``client``'s registry."""

    def __init__(self, client: Client, version: str) -> None:
        self.client = client
        self.version = version
        self._check: str | None = None

    def register(self, host: str, port: int) -> None:
        """Register the agent whose API listens at ``host``:``port``."""
        services = self.client.services()
        if services is None:
            return
        advertised = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
        service_id = f"_herder-agent-{self.client.config.node_name}-{port}"  # two agents on one host differ by port
        # A TTL check the agent keeps passing itself (heartbeat): a check the registry ran
        # against the API would need the token, and the registry would keep it for anyone to read.
        check = CheckRegistration(id=f"{service_id}-alive", name="herder-client alive", kind="ttl",
                                  ttl=SELF_CHECK_TTL)
        services.sync.set(SELF_OWNER, [ServiceRegistration(
            id=service_id, name=SELF_SERVICE, address=advertised, port=port, tags=("http",), checks=(check,))])
        self._check = check.id

    def heartbeat(self) -> None:
        """Pass the agent's own check (once its registration is in the registry)."""
        services = self.client.services()
        if services is None or self._check is None:
            return
        services.sync.flush(SELF_CHECK_INTERVAL)
        running = sum(alloc.status == "running" for alloc in self.client.allocs)
        services.sync.report(self._check, CheckStatus(
            PASSING, f"herder agent {self.version} serving, {running} allocation(s) running"))

    def remove(self) -> None:
        """Take the registration out of the registry (waiting a little for it to be sent)."""
        services = self.client.services()
        if services is not None:
            services.sync.remove(SELF_OWNER)
            services.sync.flush(2.0)
