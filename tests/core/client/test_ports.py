"""Port allocation. Tests use ports in 2000-12000 only, away from herder's default range."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator

import pytest

from herder.client.ports import PortAllocator, parse_reserved, port_is_free
from herder.context import AllocatedPort
from herder.errors import PlacementError
from herder.model import PortSpec

LOW, HIGH = 2000, 12000


def free_range(size: int) -> tuple[int, int]:
    """A run of ``size`` ports in LOW-HIGH that are all free right now."""
    for _ in range(200):
        first = random.randint(LOW, HIGH - size)
        if all(port_is_free("127.0.0.1", port) for port in range(first, first + size)):
            return first, first + size - 1
    raise RuntimeError("no free port range for the test")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP socket listening on a port in LOW-HIGH."""
    for _ in range(200):
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", random.randint(LOW, HIGH)))
        except OSError:
            sock.close()
            continue
        sock.listen()
        with sock:
            yield sock
        return
    raise RuntimeError("no free port for the test")


def test_dynamic_ports_are_in_range_and_distinct() -> None:
    low, high = free_range(50)
    allocator = PortAllocator(low, high)
    ports = allocator.allocate("a1", [PortSpec("http"), PortSpec("db", to=5432)])
    assert [p.label for p in ports] == ["http", "db"]
    assert all(low <= p.value <= high for p in ports)
    assert ports[0].value != ports[1].value
    assert ports[1].to == 5432 and ports[0].to is None
    assert all(p.host_ip == "127.0.0.1" for p in ports)
    assert allocator.held("a1") == {p.value for p in ports}


def test_live_allocations_never_share_a_port() -> None:
    low, high = free_range(20)
    allocator = PortAllocator(low, high)
    given = [
        port.value
        for index in range(10)
        for port in allocator.allocate(f"a{index}", [PortSpec("a"), PortSpec("b")])
    ]
    assert sorted(given) == list(range(low, high + 1))
    with pytest.raises(PlacementError, match=f"{low}-{high}"):
        allocator.allocate("a10", [PortSpec("http")])


def test_released_ports_can_be_given_again() -> None:
    low, high = free_range(2)
    allocator = PortAllocator(low, high)
    first = allocator.allocate("a1", [PortSpec("a"), PortSpec("b")])
    with pytest.raises(PlacementError):
        allocator.allocate("a2", [PortSpec("a")])
    allocator.release("a1")
    allocator.release("unknown")
    again = allocator.allocate("a2", [PortSpec("a"), PortSpec("b")])
    assert {p.value for p in again} == {p.value for p in first}


def test_failed_allocation_holds_nothing() -> None:
    low, high = free_range(1)
    allocator = PortAllocator(low, high)
    with pytest.raises(PlacementError):
        allocator.allocate("a1", [PortSpec("a"), PortSpec("b")])
    assert allocator.held("a1") == set()


def test_concurrent_allocations_get_distinct_ports() -> None:
    low, high = free_range(40)
    allocator = PortAllocator(low, high)
    results: list[int] = []
    lock = threading.Lock()

    def place(alloc_id: str) -> None:
        ports = allocator.allocate(alloc_id, [PortSpec("a"), PortSpec("b")])
        with lock:
            results.extend(p.value for p in ports)

    threads = [threading.Thread(target=place, args=(f"a{i}",)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(low, high + 1))


def test_static_port_taken_on_the_host_fails_placement(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    allocator = PortAllocator(*free_range(5))
    with pytest.raises(PlacementError) as caught:
        allocator.allocate("a1", [PortSpec("http"), PortSpec("admin", static=port)])
    assert str(caught.value) == f'port {port} (label "admin") is already in use on 127.0.0.1'
    assert allocator.held("a1") == set()


def test_static_port_of_another_allocation_fails_placement() -> None:
    low, high = free_range(3)
    allocator = PortAllocator(low, high)
    ports = allocator.allocate("a1", [PortSpec("admin", static=low, to=80)])
    assert ports[0].value == low and ports[0].to == 80
    with pytest.raises(PlacementError, match=f'port {low} \\(label "web"\\)'):
        allocator.allocate("a2", [PortSpec("web", static=low)])


def test_dynamic_ports_avoid_static_ones_of_the_same_request() -> None:
    low, high = free_range(2)
    allocator = PortAllocator(low, high)
    ports = allocator.allocate("a1", [PortSpec("dyn"), PortSpec("fixed", static=low)])
    assert [p.value for p in ports] == [high, low]


def test_reserved_ports_are_never_given() -> None:
    low, high = free_range(3)
    allocator = PortAllocator(low, high, reserved=[low, low + 1])
    for index in range(5):
        assert [p.value for p in allocator.allocate(f"a{index}", [PortSpec("a")])] == [high]
        allocator.release(f"a{index}")
    with pytest.raises(PlacementError, match=f'port {low} \\(label "ssh"\\) is reserved'):
        allocator.allocate("a9", [PortSpec("ssh", static=low)])


def test_reserve_existing_holds_ports_without_probing(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    allocator = PortAllocator(port, port)
    spec = [PortSpec("http")]
    allocator.reserve_existing("a1", [AllocatedPort(label="http", value=port)])
    assert allocator.held("a1") == {port}
    with pytest.raises(PlacementError, match=f"port {port} is already held by allocation a1"):
        allocator.reserve_existing("a2", [AllocatedPort(label="web", value=port)])
    listener.close()
    with pytest.raises(PlacementError):
        allocator.allocate("a2", spec)
    allocator.release("a1")
    assert [p.value for p in allocator.allocate("a2", spec)] == [port]


def test_parse_reserved() -> None:
    assert parse_reserved("22, 80,8000-8002,") == {22, 80, 8000, 8001, 8002}
    assert parse_reserved("") == set()
    for bad in ("http", "10-5", "0", "70000", "1-2-3"):
        with pytest.raises(ValueError, match="invalid port"):
            parse_reserved(bad)


def test_invalid_range_is_refused() -> None:
    with pytest.raises(ValueError, match="range"):
        PortAllocator(3000, 2000)
