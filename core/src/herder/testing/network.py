"""The contract's tests of a driver's network: what it declares, and that its task joins its allocation's namespace.

:class:`NetworkContract` is a part of :class:`herder.testing.DriverContract`
(which a driver's test module subclasses); it is not used on its own.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from herder.objects import DriverCapabilities
from herder.plugins.hooks import Hooks
from herder.testing import netns
from herder.testing.harness import (
    CALL_LIMIT,
    PORT_RANGE,
    DidNotReturn,
    DriverHarness,
    bounded,
    call_own_hook,
    diagnosis,
    load_hooks,
)

NETWORK_ISOLATION = frozenset({"host", "group"})
"""What ``DriverCapabilities.network_isolation`` may hold."""
CAPABILITIES_DEADLINE = 5.0
"""How long ``herder_driver_capabilities`` may take: it runs when a job is validated."""
CONNECT_TIMEOUT = 30.0
"""How long the task of :meth:`NetworkContract.connects_to` has to connect once started."""
ACCEPT_POLL = 0.2
"""Between two looks at whether the task ended without connecting."""
CONNECTING_KILL_TIMEOUT = "1s"
"""The ``kill_timeout`` of that task, which may still run when the test ends."""


class NetworkContract:
    """The network tests of :class:`herder.testing.DriverContract`.

    A driver whose ``herder_driver_capabilities`` include ``"group"`` says
    that its task's processes run in the allocation's network namespace
    (``ctx.network``) when the group has one (``network { mode = "bridge" }``):
    the kit holds it to that with the task of :meth:`connects_to`, which
    must reach a server the kit listens with on ``127.0.0.1`` *inside* the
    namespace. A task in the host's network reaches nothing there.
    """

    driver: ClassVar[str] = ""
    plugin_config: ClassVar[Mapping[str, Any]] = {}

    def connects_to(self, port: int) -> dict[str, Any] | None:
        """A task that opens a TCP connection to ``127.0.0.1:port`` (once is enough; what it sends, and
        whether it exits after, do not matter). Optional: None (the default) skips the test of a driver
        that declares it joins its allocation's network.

        For a shell with busybox: ``nc 127.0.0.1 PORT </dev/null``. A virtual machine whose user-mode
        network is QEMU's reaches QEMU's own ``127.0.0.1`` at its gateway, ``10.0.2.2``.
        """
        return None

    def test_declares_its_network_isolation(self) -> None:
        capabilities = self._capabilities(load_hooks(self.driver, self.plugin_config))
        isolation = capabilities.network_isolation
        assert isinstance(isolation, frozenset) and isolation, \
            f"network_isolation must be a non-empty frozenset, not {isolation!r}"
        assert isolation <= NETWORK_ISOLATION, \
            f"network_isolation holds {sorted(isolation - NETWORK_ISOLATION)}, which herder does not know " \
            f"(it knows {sorted(NETWORK_ISOLATION)})"

    def test_joins_the_allocations_network(self, harness: DriverHarness) -> None:
        capabilities = harness.hooks.capabilities(self.driver)
        if "group" not in capabilities.network_isolation:
            pytest.skip(f"driver {self.driver} declares host networking only: herder refuses its tasks in a "
                        "group with a network of its own, at validation")
        port = random.randint(*PORT_RANGE)  # the namespace is the test's own: any port of it is free
        config = self.connects_to(port)
        if config is None:
            pytest.skip(f"driver {self.driver} declares that it joins its allocation's network, but "
                        f"{type(self).__name__}.connects_to() gives no task to show it")
        try:
            run = harness.task(config, group_network=True, kill_timeout=CONNECTING_KILL_TIMEOUT)
        except netns.NetworkUnavailable as exc:
            pytest.skip(f"no network namespace for the allocation: {exc}")
        assert run.network is not None
        with netns.listening(run.network.path, port) as server:
            run.start()
            deadline = time.monotonic() + CONNECT_TIMEOUT
            while not (arrived := netns.accepted(server, ACCEPT_POLL)):
                if time.monotonic() >= deadline or bounded(lambda: run.wait(0), CALL_LIMIT, "wait(0)") is not None:
                    arrived = netns.accepted(server, 0)  # one that came as the task ended
                    break
        assert arrived, \
            f"the task did not connect to 127.0.0.1:{port} in its allocation's network namespace " \
            f"({run.network.path}) within {CONNECT_TIMEOUT:g}s: do its processes run in another network, " \
            f"the host's?{diagnosis(run)}"

    def _capabilities(self, hooks: Hooks) -> DriverCapabilities:
        """The driver's own capabilities hook, called directly (the facade would turn an exception into
        the defaults), checked to return in time and never raise; the defaults when it has none."""
        try:
            capabilities = call_own_hook(hooks, self.driver, "herder_driver_capabilities", CAPABILITIES_DEADLINE)
        except DidNotReturn:
            raise
        except Exception as exc:
            pytest.fail(f"herder_driver_capabilities raised {type(exc).__name__}: {exc}", pytrace=False)
        if capabilities is None:
            return DriverCapabilities()
        assert isinstance(capabilities, DriverCapabilities), \
            f"herder_driver_capabilities gave {capabilities!r}, not a DriverCapabilities"
        return capabilities
