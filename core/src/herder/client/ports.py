"""Host ports for allocations.

One :class:`PortAllocator` serves every allocation of a process. Dynamic
ports are picked at random from a range below the Linux ephemeral range
(32768-60999), so the kernel never hands them out for outgoing connections;
each candidate is checked free on the host address with a bind probe (TCP and
UDP), and no port is ever given to two live allocations.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterable, Sequence

from herder.context import AllocatedPort
from herder.errors import PlacementError
from herder.model import PortSpec

DEFAULT_MIN_PORT = 20000
DEFAULT_MAX_PORT = 32000
MAX_DYNAMIC_ATTEMPTS = 100
"""Candidates probed for one dynamic port before placement fails."""


def parse_reserved(text: str) -> set[int]:
    """Parse a reserved-port list such as ``"22,80,8000-8100"`` (whitespace allowed)."""
    ports: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise ValueError(f"invalid port or port range {part!r}") from None
        if not 1 <= low <= high <= 65535:
            raise ValueError(f"invalid port or port range {part!r}")
        ports.update(range(low, high + 1))
    return ports


def port_is_free(host_ip: str, port: int) -> bool:
    """Whether ``port`` can be bound on ``host_ip`` for both TCP and UDP.

    The TCP probe sets ``SO_REUSEADDR`` like servers do, so connections of a
    task that just stopped (in ``TIME_WAIT``) do not hold the port.
    """
    family = socket.AF_INET6 if ":" in host_ip else socket.AF_INET
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(family, kind) as probe:
            if kind == socket.SOCK_STREAM:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host_ip, port))
            except OSError:
                return False
    return True


class PortAllocator:
    """Gives allocations host ports, never the same port to two live ones. Thread-safe."""

    def __init__(
        self,
        min_port: int = DEFAULT_MIN_PORT,
        max_port: int = DEFAULT_MAX_PORT,
        reserved: Iterable[int] = (),
        host_ip: str = "127.0.0.1",
    ) -> None:
        if not 1 <= min_port <= max_port <= 65535:
            raise ValueError(f"invalid dynamic port range {min_port}-{max_port}")
        self.min_port = min_port
        self.max_port = max_port
        self.reserved = frozenset(reserved)
        self.host_ip = host_ip
        self._held: dict[str, set[int]] = {}
        self._lock = threading.Lock()
        self._random = random.SystemRandom()

    def allocate(self, alloc_id: str, specs: Sequence[PortSpec]) -> list[AllocatedPort]:
        """Ports for ``specs``, held for ``alloc_id`` until :meth:`release`.

        Static ports are checked first, then each dynamic port is picked.
        Raises :class:`PlacementError` if a static port is reserved or taken,
        or no free dynamic port turns up.
        """
        with self._lock:
            taken = self._held_ports()
            taken |= self._held.get(alloc_id, set())
            chosen: dict[str, int] = {}
            for spec in specs:
                if spec.static is not None:
                    self._check_static(spec, spec.static, taken)
                    taken.add(spec.static)
                    chosen[spec.label] = spec.static
            for spec in specs:
                if spec.static is None:
                    chosen[spec.label] = self._pick_dynamic(spec.label, taken)
                    taken.add(chosen[spec.label])
            self._held.setdefault(alloc_id, set()).update(chosen.values())
        return [
            AllocatedPort(label=spec.label, value=chosen[spec.label], to=spec.to, host_ip=self.host_ip)
            for spec in specs
        ]

    def reserve_existing(self, alloc_id: str, ports: Iterable[AllocatedPort]) -> None:
        """Hold the ports an allocation already has (reattaching after a restart).

        No bind probe: the allocation's tasks are expected to be using them.
        """
        wanted = {port.value for port in ports}
        with self._lock:
            for other, held in self._held.items():
                clash = sorted(wanted & held) if other != alloc_id else []
                if clash:
                    raise PlacementError(
                        f"port {clash[0]} is already held by allocation {other}"
                    )
            self._held.setdefault(alloc_id, set()).update(wanted)

    def release(self, alloc_id: str) -> None:
        """Give back every port of ``alloc_id``; unknown ids are ignored."""
        with self._lock:
            self._held.pop(alloc_id, None)

    def held(self, alloc_id: str) -> set[int]:
        """The ports currently held for ``alloc_id``."""
        with self._lock:
            return set(self._held.get(alloc_id, ()))

    def _held_ports(self) -> set[int]:
        return set().union(*self._held.values())

    def _check_static(self, spec: PortSpec, port: int, taken: set[int]) -> None:
        where = f'port {port} (label "{spec.label}")'
        if port in self.reserved:
            raise PlacementError(f"{where} is reserved on this host")
        if port in taken or not port_is_free(self.host_ip, port):
            raise PlacementError(f"{where} is already in use on {self.host_ip}")

    def _pick_dynamic(self, label: str, taken: set[int]) -> int:
        size = self.max_port - self.min_port + 1
        candidates = self._random.sample(
            range(self.min_port, self.max_port + 1), min(size, MAX_DYNAMIC_ATTEMPTS)
        )
        for port in candidates:
            if port not in taken and port not in self.reserved and port_is_free(self.host_ip, port):
                return port
        raise PlacementError(
            f'no free dynamic port for label "{label}" in {self.min_port}-{self.max_port} '
            f"on {self.host_ip}"
        )
