"""herder's own lifecycle plugins: what a task needs around its driver.

Each concern (the dispatch payload, workload identities, artifacts, templates, services, Connect's sidecars) is a
plugin of its own module,
implementing the same hooks third-party plugins do. The client creates them
for itself and registers them in the built-in phase, so in
``herder_task_prestart`` they run before every third-party plugin, and in
``herder_task_cleanup`` after.

A built-in plugin may hold background work (a sync loop, a cache): the client
calls ``start()`` when it starts and ``close()`` when it closes.
"""

from __future__ import annotations

from typing import Protocol

from herder.client.hooks.artifacts import ArtifactsConfig, ArtifactsPlugin
from herder.client.hooks.connect import ConnectPlugin
from herder.client.hooks.host import Host
from herder.client.hooks.identity import IdentityPlugin
from herder.client.hooks.payload import PayloadPlugin
from herder.client.hooks.services import ServicesPlugin
from herder.client.hooks.template_sources import NativeCatalog
from herder.client.hooks.templates import TemplatesConfig, TemplatesPlugin, template_sources


class BuiltinPlugin(Protocol):
    """What the client expects of one of its built-in plugins, besides hook implementations."""

    name: str

    def start(self) -> None: ...

    def close(self) -> None: ...


def builtin_plugins(client: Host) -> list[BuiltinPlugin]:
    """The built-in plugins of ``client``, in the order they run in prestart."""
    services = ServicesPlugin(client)
    kv, catalog = template_sources(client.config, services.backend)
    native = NativeCatalog(services.discovery)
    return [
        PayloadPlugin(client),
        IdentityPlugin(client),
        ArtifactsPlugin(ArtifactsConfig.from_table(client.config.plugin.get("artifacts", {}))),
        TemplatesPlugin(TemplatesConfig.from_table(client.config.plugin.get("templates", {})), kv=kv,
                        catalog=catalog, native=native, runners=client.task_runner),
        services,
        ConnectPlugin(client, services),
    ]
