"""The CNI plugins, run as the CNI specification says a runtime runs them.

A network configuration list (a "conflist") names plugins in order. ADD runs
each in turn with the list's ``name`` and ``cniVersion`` merged into the
plugin's own configuration on its stdin, the result of the one before as
``prevResult``, and the runtime's values for the capabilities it declares
(``runtimeConfig.portMappings``); DEL runs them in the reverse order with the
result ADD gave. The container, its namespace and the interface to make are
given in ``CNI_*`` variables. A plugin answers with JSON on stdout, and says
why it failed with a JSON error there and a non-zero exit.

No well-kept CNI library exists for Python; this is the part of the spec a
runtime needs (no CHECK, no GC, no result cache: the caller stores results).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from herder.errors import HerderError
from herder.model import NetworkDNS

PLUGIN_TIMEOUT = 60.0
"""How long one plugin may take for one command (the bridge plugin waits for the link's address)."""

OUTPUT_LIMIT = 1024 * 1024
"""The most of a plugin's stdout (its result) and stderr read; a result is a few KiB."""

CONFIG_LIMIT = 1024 * 1024
"""The largest configuration file read from the operator's directory."""

CONFIG_SUFFIXES = (".conflist", ".conf", ".json")
"""The files of a CNI configuration directory, as libcni reads them."""


class CniError(HerderError):
    """A CNI plugin failed, could not run, or a configuration is wrong; the message says which and why."""


@dataclass(frozen=True)
class PortMapping:
    """A host port forwarded to a port inside the namespace (the portmap plugin's ``portMappings``)."""

    host_port: int
    container_port: int
    protocol: str = "tcp"
    host_ip: str = ""

    def as_runtime_config(self) -> dict[str, Any]:
        mapping: dict[str, Any] = {"hostPort": self.host_port, "containerPort": self.container_port,
                                   "protocol": self.protocol}
        if self.host_ip:
            mapping["hostIP"] = self.host_ip
        return mapping


@dataclass(frozen=True)
class ConfList:
    """A network configuration list: ``name``, ``cniVersion`` and its plugins' configurations, in order."""

    name: str
    cni_version: str
    plugins: tuple[dict[str, Any], ...]

    def to_json(self) -> str:
        return json.dumps({"cniVersion": self.cni_version, "name": self.name, "plugins": list(self.plugins)})

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "the configuration") -> ConfList:
        """A conflist, or a single plugin's configuration (a ``.conf`` file) as a list of one.

        :raises CniError: when it is not one, naming ``source``.
        """
        try:
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise CniError(f"{source} is not JSON: {err}") from None
        if not isinstance(document, dict):
            raise CniError(f"{source} is not a JSON object")
        plugins = document.get("plugins") if "plugins" in document else [
            {key: value for key, value in document.items() if key not in ("name", "cniVersion")}]
        name, version = document.get("name"), document.get("cniVersion", "0.4.0")
        if not isinstance(name, str) or not name:
            raise CniError(f"{source} has no name")
        if not isinstance(version, str):
            raise CniError(f"{source}: cniVersion must be a string")
        if not isinstance(plugins, list) or not plugins or not all(
                isinstance(plugin, dict) and isinstance(plugin.get("type"), str) and plugin["type"]
                for plugin in plugins):
            raise CniError(f"{source}: plugins must be a list of objects, each with a type")
        for plugin in plugins:
            if "/" in plugin["type"] or plugin["type"] in (".", ".."):
                raise CniError(f"{source}: plugin type {plugin['type']!r} is not a plugin's name")
        return cls(name=name, cni_version=version, plugins=tuple(plugins))

    @classmethod
    def load(cls, config_dir: Path, name: str) -> ConfList:
        """The configuration named ``name`` in ``config_dir``, as libcni finds it: the files
        ending in ``.conflist``, ``.conf`` or ``.json``, in the order of their names, the first
        whose ``name`` it is.

        :raises CniError: when there is none, or a file cannot be read.
        """
        try:
            entries = sorted(entry for entry in os.listdir(config_dir) if entry.endswith(CONFIG_SUFFIXES))
        except OSError as err:
            raise CniError(f"cannot read the CNI configuration directory {config_dir}: {err.strerror}") from None
        for entry in entries:
            path = config_dir / entry
            try:
                with open(path, "rb") as file:
                    text = file.read(CONFIG_LIMIT + 1)
            except OSError as err:
                raise CniError(f"cannot read the CNI configuration {path}: {err.strerror}") from None
            if len(text) > CONFIG_LIMIT:
                raise CniError(f"the CNI configuration {path} is larger than {CONFIG_LIMIT} bytes")
            conflist = cls.from_json(text, str(path))
            if conflist.name == name:
                return conflist
        raise CniError(f"no CNI network configuration named {name!r} in {config_dir}")


@dataclass(frozen=True)
class Attachment:
    """One container's attachment to a network: what every command for it repeats."""

    container_id: str
    netns: Path
    ifname: str = "eth0"
    port_mappings: tuple[PortMapping, ...] = ()


class Cni:
    """Runs the plugins found in ``paths`` (the first directory that has a plugin wins, as ``CNI_PATH``)."""

    def __init__(self, paths: Sequence[Path], environ: Mapping[str, str] = os.environ) -> None:
        self.paths = tuple(paths)
        # The plugins run iptables, ip6tables and the like: they need a PATH, and nothing else of herder's.
        self._path = environ.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    def find(self, plugin: str) -> Path | None:
        for directory in self.paths:
            candidate = directory / plugin
            if os.access(candidate, os.X_OK) and candidate.is_file():
                return candidate
        return None

    def add(self, conflist: ConfList, attachment: Attachment) -> dict[str, Any]:
        """Attach: every plugin's ADD in order; the last one's result.

        On a failure the plugins are run with DEL, so that nothing of a half-made attachment stays.

        :raises CniError: naming the plugin and what it said.
        """
        result: dict[str, Any] | None = None
        try:
            for plugin in conflist.plugins:
                result = self._run("ADD", conflist, plugin, attachment, result)
        except CniError:
            self.delete(conflist, attachment, result, strict=False)
            raise
        return result or {}

    def delete(self, conflist: ConfList, attachment: Attachment, result: Mapping[str, Any] | None, *,
               strict: bool = True) -> list[str]:
        """Detach: every plugin's DEL in the reverse order, each given ``result`` (ADD's, if known).

        Every plugin runs even when one before failed (each releases something of its own).
        With ``strict`` the first failure is raised after all ran; else the failures are returned.
        """
        failures: list[str] = []
        for plugin in reversed(conflist.plugins):
            try:
                self._run("DEL", conflist, plugin, attachment, dict(result) if result else None)
            except CniError as err:
                failures.append(str(err))
        if failures and strict:
            raise CniError("; ".join(failures))
        return failures

    def _run(self, command: str, conflist: ConfList, plugin: Mapping[str, Any], attachment: Attachment,
             previous: dict[str, Any] | None) -> dict[str, Any]:
        kind = str(plugin["type"])
        executable = self.find(kind)
        if executable is None:
            raise CniError(f"CNI plugin {kind} ({command}) is not in {os.pathsep.join(map(str, self.paths))}")
        config: dict[str, Any] = {**plugin, "name": conflist.name, "cniVersion": conflist.cni_version}
        config.pop("runtimeConfig", None)
        if previous is not None:
            config["prevResult"] = previous
        capabilities = plugin.get("capabilities")
        if isinstance(capabilities, dict) and capabilities.get("portMappings"):
            config["runtimeConfig"] = {
                "portMappings": [mapping.as_runtime_config() for mapping in attachment.port_mappings]}
        env = {
            "PATH": self._path, "CNI_COMMAND": command, "CNI_CONTAINERID": attachment.container_id,
            "CNI_NETNS": str(attachment.netns), "CNI_IFNAME": attachment.ifname, "CNI_ARGS": "IgnoreUnknown=true",
            "CNI_PATH": os.pathsep.join(map(str, self.paths)),
        }
        code, stdout, stderr = _execute([str(executable)], env, json.dumps(config).encode())
        what = f"CNI plugin {kind} ({command})"
        if code != 0:
            raise CniError(f"{what} failed: {_error_message(stdout, stderr, code)}")
        if command == "DEL" or not stdout.strip():
            return previous or {}
        try:
            answer = json.loads(stdout)
        except ValueError:
            raise CniError(f"{what} gave no JSON result: {_excerpt(stdout)}") from None
        if not isinstance(answer, dict):
            raise CniError(f"{what} gave no JSON object: {_excerpt(stdout)}")
        return answer


def first_address(result: Mapping[str, Any]) -> str:
    """The allocation's address in a result: the first IPv4 address of an interface inside the
    namespace (one with a ``sandbox``), else the first address at all; "" when it has none.
    (Nomad reads a result so.) A loopback address is none: the loopback plugin's alone (mode
    ``none``) gives the allocation no address another host reaches."""
    listed = result.get("interfaces")
    interfaces: list[Any] = listed if isinstance(listed, list) else []
    ips = [ip for ip in result.get("ips") or [] if isinstance(ip, dict) and isinstance(ip.get("address"), str)]

    def in_sandbox(ip: Mapping[str, Any]) -> bool:
        index = ip.get("interface")
        return (isinstance(index, int) and 0 <= index < len(interfaces)
                and isinstance(interfaces[index], dict) and bool(interfaces[index].get("sandbox")))

    for candidates in ([ip for ip in ips if in_sandbox(ip)], ips):
        addresses = [address for ip in candidates if not _loopback(address := str(ip["address"]).split("/")[0])]
        for address in [a for a in addresses if ":" not in a] + addresses:
            return address
    return ""


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return True  # not an address at all: none to give the allocation


def result_dns(result: Mapping[str, Any]) -> NetworkDNS | None:
    """The DNS settings a result gives (an operator's plugin may), None when it gives no server."""
    dns = result.get("dns")
    if not isinstance(dns, dict) or not isinstance(dns.get("nameservers"), list) or not dns["nameservers"]:
        return None

    def strings(key: str) -> tuple[str, ...]:
        value = dns.get(key)
        return tuple(str(item) for item in value) if isinstance(value, list) else ()

    return NetworkDNS(servers=strings("nameservers"), searches=strings("search"), options=strings("options"))


def _execute(argv: list[str], env: dict[str, str], stdin: bytes) -> tuple[int, bytes, bytes]:
    """Run a plugin to its end with ``stdin``; its exit code and (bounded) stdout and stderr."""
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as err:
        raise CniError(f"cannot run {argv[0]}: {err.strerror}") from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    outputs: dict[str, bytes] = {}
    readers = [threading.Thread(target=_read_bounded, args=(stream, outputs, name), daemon=True)
               for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        with proc.stdin:
            proc.stdin.write(stdin)
    except BrokenPipeError:
        pass  # it exited without reading its configuration: its exit says why
    try:
        code = proc.wait(PLUGIN_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise CniError(f"{argv[0]} did not finish within {PLUGIN_TIMEOUT:g} s") from None
    for reader in readers:
        reader.join(PLUGIN_TIMEOUT)
    return code, outputs.get("stdout", b""), outputs.get("stderr", b"")


def _read_bounded(stream: IO[bytes], outputs: dict[str, bytes], name: str) -> None:
    """Read ``stream`` to its end, keeping its first :data:`OUTPUT_LIMIT` bytes."""
    kept: list[bytes] = []
    size = 0
    with stream:
        while chunk := stream.read(65536):
            if size < OUTPUT_LIMIT:
                kept.append(chunk[: OUTPUT_LIMIT - size])
                size += len(kept[-1])
    outputs[name] = b"".join(kept)


def _error_message(stdout: bytes, stderr: bytes, code: int) -> str:
    """What a failed plugin said: its JSON error's ``msg`` and ``details``, else its output."""
    try:
        error = json.loads(stdout)
    except ValueError:
        error = None
    if isinstance(error, dict) and isinstance(error.get("msg"), str):
        details = error.get("details")
        return f"{error['msg']}: {details}" if isinstance(details, str) and details else error["msg"]
    said = _excerpt(stdout.strip() or stderr.strip())
    return said or f"exit code {code}"


def _excerpt(data: bytes, limit: int = 500) -> str:
    text = data.decode(errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def mappings_for(ports: Iterable[tuple[int, int, str]]) -> tuple[PortMapping, ...]:
    """A port mapping per protocol, TCP and UDP, of each (host port, port inside, host address): as Nomad
    maps a group port, since a job does not say which protocol a port speaks."""
    # The unspecified address (host_ip = "0.0.0.0") is every address: a mapping without one.
    return tuple(PortMapping(host_port=host, container_port=inside, protocol=protocol,
                             host_ip="" if host_ip in ("0.0.0.0", "::") else host_ip)
                 for host, inside, host_ip in ports for protocol in ("tcp", "udp"))
