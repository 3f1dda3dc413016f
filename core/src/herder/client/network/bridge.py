"""Nomad's bridge network: its configuration list, and the firewall rule it adds beside the plugins'.

As Nomad's ``networking_bridge_linux.go``: a ``loopback``; a ``bridge`` (the
allocations' gateway, masquerading their traffic out, hairpin so an allocation
reaches itself through its own mapped ports) with ``host-local`` addresses of
the subnet and a default route; the ``firewall`` plugin with Nomad's admin
chain; ``portmap`` for the mapped ports, with SNAT so that the host reaches
them on its loopback address too.
"""

from __future__ import annotations

import subprocess

from herder.client.network.cni import CniError, ConfList

ADMIN_CHAIN = "NOMAD-ADMIN"
"""The firewall plugin's admin chain, Nomad's: rules an operator (and herder) adds there are kept."""

CNI_VERSION = "0.4.0"
IPAM_DATA_DIR = "/var/run/cni"
"""Where host-local keeps its leases, as Nomad has it: gone at a reboot, with the namespaces."""

IPTABLES_TIMEOUT = 30.0

LOOPBACK_GUARD = ("-d", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
                  "-m", "comment", "--comment", "herder: allocations never reach the host loopback", "-j", "DROP")
"""The portmap plugin sets ``route_localnet`` on the bridge, so that the host reaches a mapped port on
127.0.0.1 (the answers come back over the bridge to 127.0.0.1). The kernel then also takes a packet a task
with ``NET_RAW`` makes, from the bridge to 127.0.0.1, for whatever listens on the host's loopback alone
(the agent, Consul): only the answers of connections the host made are let in (as Kubernetes' rule for the
same setting, CVE-2020-8558)."""


def bridge_conflist(bridge_name: str, subnet: str) -> ConfList:
    """The configuration list of Nomad's bridge network, named ``nomad`` as Nomad's is."""
    return ConfList(name="nomad", cni_version=CNI_VERSION, plugins=(
        {"type": "loopback"},
        {
            "type": "bridge", "bridge": bridge_name, "ipMasq": True, "isGateway": True, "forceAddress": True,
            "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}],
                     "dataDir": IPAM_DATA_DIR},
        },
        {"type": "firewall", "backend": "iptables", "iptablesAdminChainName": ADMIN_CHAIN},
        {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True},
    ))


def none_conflist() -> ConfList:
    """``mode = "none"``: a namespace of its own with its loopback up, and no other interface."""
    return ConfList(name="none", cni_version=CNI_VERSION, plugins=({"type": "loopback"},))


def ensure_forwarding(bridge_name: str, subnet: str) -> None:
    """Accept what is forwarded to the bridge's subnet, in the admin chain (as Nomad's
    ``ensureForwardingRules``): a host whose FORWARD policy is DROP (Docker sets it) still
    lets answers reach the allocations. And drop what comes from the bridge for the host's
    loopback addresses (:data:`LOOPBACK_GUARD`).

    :raises CniError: when iptables fails.
    """
    if _iptables("-t", "filter", "-n", "-L", ADMIN_CHAIN, check=False) != 0:
        _iptables("-t", "filter", "-N", ADMIN_CHAIN, check=False)  # another herder may make it meanwhile
    rule = ("-o", bridge_name, "-d", subnet, "-j", "ACCEPT")
    if _iptables("-t", "filter", "-C", ADMIN_CHAIN, *rule, check=False) != 0:
        _iptables("-t", "filter", "-A", ADMIN_CHAIN, *rule)
    if _iptables("-t", "filter", "-C", "INPUT", *LOOPBACK_GUARD, "-i", bridge_name, check=False) != 0:
        _iptables("-t", "filter", "-I", "INPUT", "1", *LOOPBACK_GUARD, "-i", bridge_name)


def _iptables(*args: str, check: bool = True) -> int:
    argv = ["iptables", "-w", *args]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=IPTABLES_TIMEOUT, stdin=subprocess.DEVNULL,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CniError(f"cannot run {' '.join(argv)}: {err}") from None
    if check and done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:500]
        raise CniError(f"{' '.join(argv)} failed: {said or f'exit code {done.returncode}'}")
    return done.returncode
