"""Native service discovery (``provider = "nomad"``) against what a job's author registers and renders.

A job may register thousands of services in the embedded registry (each task's ``service`` blocks, each
group's, a count of them). A template that walks them the way consul-template's examples do,
``range nomadServices`` then ``nomadService .Name`` for each, read the whole registry once per name: a
render of a few thousand services was past the render's CPU bound (so the template could not be
rendered at all), and the template watcher, which compares each dependency again every poll (outside
that bound), spent as long on every poll, holding the one watcher thread every task's templates share.

The registry is a real :class:`LocalRegistry`, the one a client holds, written to as its sync loop
writes; ``tests/core/nomad_api/test_native_services.py`` runs the registry through a real agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks.template_sources import NativeCatalog
from herder.client.hooks.templates import TemplatesPlugin
from herder.model import Template
from herder.services import ServiceRegistration
from herder.services.local import LocalRegistry
from herder.services.native import NativeServices
from tests.core.client.artifact_support import Context

SERVICES = 4000
"""Past a few thousand, each name's read of the whole registry put the render over its CPU bound."""

WALK = '{{ range nomadServices }}{{ range nomadService .Name }}{{ .Name }} {{ .Port }}\n{{ end }}{{ end }}'


@pytest.fixture
def registry() -> Iterator[LocalRegistry]:
    found = LocalRegistry()
    yield found
    found.close()


@pytest.fixture
def plugin(registry: LocalRegistry) -> Iterator[TemplatesPlugin]:
    plugin = TemplatesPlugin(native=NativeCatalog(NativeServices(registry, "node", "dc1")))
    yield plugin
    plugin.close()


def test_walking_thousands_of_services_reads_the_registry_once(
        plugin: TemplatesPlugin, registry: LocalRegistry, tmp_path: Path) -> None:
    for index in range(SERVICES):
        registry.register(ServiceRegistration(
            id=f"_herder-task-alloc{index}-t-svc{index}-http", name=f"svc{index:05}", address="10.0.0.1",
            port=2000 + index, job_id="many", alloc_id=f"alloc{index}"))
    ctx = Context(tmp_path / "run").ctx
    content, deps, missing = plugin.render(Template(destination="local/out", data=WALK), ctx)
    assert missing == []
    assert content.splitlines() == [f"svc{index:05} {2000 + index}" for index in range(SERVICES)]
    # What the watcher does each poll: every dependency looked up again, and none changed.
    assert len(deps) == SERVICES + 1
    assert all(plugin.lookup(kind, arg, ctx) == value for (kind, arg), value in deps.items())

    registry.deregister("_herder-task-alloc7-t-svc7-http")
    assert plugin.lookup("nomad.service", "svc00007", ctx) == ()
