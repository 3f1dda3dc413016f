"""Reading a CNI result: the allocation's address and the DNS settings a plugin gives."""

from __future__ import annotations

from herder.client.network.cni import first_address, mappings_for, result_dns
from herder.model import NetworkDNS

RESULT = {
    "cniVersion": "0.4.0",
    "interfaces": [{"name": "nomad"}, {"name": "veth1"}, {"name": "eth0", "sandbox": "/var/run/netns/x"}],
    "ips": [{"version": "4", "interface": 0, "address": "10.0.0.1/24"},
            {"version": "6", "interface": 2, "address": "fd00::5/64"},
            {"version": "4", "interface": 2, "address": "172.26.64.7/20"}],
    "dns": {"nameservers": ["192.0.2.53"], "search": ["example.com"], "options": ["ndots:2"]},
}


def test_the_address_is_the_first_ipv4_one_inside_the_namespace() -> None:
    assert first_address(RESULT) == "172.26.64.7"
    assert first_address({**RESULT, "ips": RESULT["ips"][:2]}) == "fd00::5"
    assert first_address({"ips": [{"address": "10.1.0.2/16"}]}) == "10.1.0.2"  # no interface said: any
    assert first_address({}) == ""
    loopback = {"interfaces": [{"name": "lo", "sandbox": "/var/run/netns/x"}],
                "ips": [{"interface": 0, "address": "127.0.0.1/8"}, {"interface": 0, "address": "::1/128"}]}
    assert first_address(loopback) == ""


def test_dns_only_when_a_server_is_given() -> None:
    assert result_dns(RESULT) == NetworkDNS(servers=("192.0.2.53",), searches=("example.com",), options=("ndots:2",))
    assert result_dns({"dns": {}}) is None and result_dns({}) is None


def test_each_port_is_mapped_for_tcp_and_udp() -> None:
    [tcp, udp] = mappings_for([(2000, 8080, "127.0.0.1")])
    assert (tcp.protocol, udp.protocol) == ("tcp", "udp")
    assert tcp.as_runtime_config() == {"hostPort": 2000, "containerPort": 8080, "protocol": "tcp",
                                       "hostIP": "127.0.0.1"}
    [every, _] = mappings_for([(2000, 8080, "0.0.0.0")])
    assert "hostIP" not in every.as_runtime_config()  # every address of the host
