"""consul-template's Nomad functions over herder's embedded registry: ``nomadService``, ``nomadServices``,
and the ``nomadVar`` family refused by name.

The registry is a real :class:`LocalRegistry` (the one a client has), written to as the sync loop does;
``tests/core/nomad_api/test_native_services.py`` runs the same through a real agent and real tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks.template_sources import NativeCatalog
from herder.client.hooks.templates import TemplateRenderError, TemplatesPlugin
from herder.model import Template
from herder.services import ServiceRegistration
from herder.services.local import LocalRegistry
from herder.services.native import NativeServices, Registration
from tests.core.client.artifact_support import Context

NODE = "8b1c1a8e-0000-5000-8000-000000000001"


@pytest.fixture
def registry() -> Iterator[LocalRegistry]:
    found = LocalRegistry()
    yield found
    found.close()


@pytest.fixture
def plugin(registry: LocalRegistry) -> Iterator[TemplatesPlugin]:
    plugin = TemplatesPlugin(native=NativeCatalog(NativeServices(registry, NODE, "dc1")))
    yield plugin
    plugin.close()


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "run")


def web(index: int, *tags: str, name: str = "web") -> ServiceRegistration:
    return ServiceRegistration(id=f"_herder-task-alloc{index}-t-{name}-http", name=name, address="10.0.0.1",
                               port=8000 + index, tags=tags, job_id=f"job{index}", alloc_id=f"alloc{index}")


def render(plugin: TemplatesPlugin, context: Context, data: str) -> str:
    content, _deps, missing = plugin.render(Template(destination="local/out", data=data), context.ctx)
    assert missing == []
    return content


def test_nomad_service_lists_every_instance_with_consul_templates_fields(
        plugin: TemplatesPlugin, registry: LocalRegistry, context: Context) -> None:
    registry.register(web(2, "b", "a"))
    registry.register(web(1))
    registry.register(web(3, name="db"))
    text = render(plugin, context, '{{ range nomadService "web" }}{{ .Name }} {{ .Address }}:{{ .Port }} '
                                   '{{ .JobID }} {{ .AllocID }} {{ .Datacenter }} {{ .Node }} {{ .Tags }}\n{{ end }}')
    assert text == (f"web 10.0.0.1:8001 job1 alloc1 dc1 {NODE} []\n"
                    f"web 10.0.0.1:8002 job2 alloc2 dc1 {NODE} [a b]\n")


def test_a_tag_filters_instances_and_no_instance_renders_empty(
        plugin: TemplatesPlugin, registry: LocalRegistry, context: Context) -> None:
    registry.register(web(1, "v1"))
    registry.register(web(2, "v2"))
    assert render(plugin, context, '{{ range nomadService "v2.web" }}{{ .Port }}{{ end }}') == "8002"
    assert render(plugin, context, '{{ range nomadService "v2.web@global" }}{{ .Port }}{{ end }}') == "8002"
    # Not "missing": as in Nomad, the file is rendered, and rendered again when an instance comes.
    assert render(plugin, context, '[{{ range nomadService "nothing" }}{{ .Port }}{{ end }}]') == "[]"


def test_a_tag_with_a_colon_filters_in_both_forms(
        plugin: TemplatesPlugin, registry: LocalRegistry, context: Context) -> None:
    # consul-template's tags may carry ":" (``env:prod``, ``urlprefix-:80``); the query and the
    # rendezvous choice were told apart at the first ":", so such a tag was an error.
    registry.register(web(1, "env:prod"))
    registry.register(web(2, "env:dev"))
    assert render(plugin, context, '{{ range nomadService "env:prod.web" }}{{ .Port }}{{ end }}') == "8001"
    assert render(plugin, context, '{{ range nomadService 5 "k:e|y" "env:dev.web" }}{{ .Port }}{{ end }}') == "8002"


def test_the_rendezvous_form_picks_a_stable_subset_per_key(
        plugin: TemplatesPlugin, registry: LocalRegistry, context: Context) -> None:
    for index in range(1, 6):
        registry.register(web(index))
    template = '{{ range nomadService 2 "%s" "web" }}{{ .Port }} {{ end }}'
    picks = {key: render(plugin, context, template % key) for key in ("alloc-a", "alloc-b", "alloc-c", "alloc-d")}
    assert all(len(pick.split()) == 2 for pick in picks.values())
    assert len(set(picks.values())) > 1, picks  # each key ranks the instances its own way
    assert render(plugin, context, template % "alloc-a") == picks["alloc-a"]
    # Nomad's ranking: sha256 of the instance's fields and the key, lowest first.
    native = NativeServices(registry, NODE, "dc1").registrations("web")
    expected = sorted(native, key=lambda r: Registration.hash_with(r, "alloc-a"))[:2]
    assert picks["alloc-a"] == "".join(f"{r.Port} " for r in expected)


def test_nomad_services_lists_names_with_their_tags(
        plugin: TemplatesPlugin, registry: LocalRegistry, context: Context) -> None:
    registry.register(web(1, "v1"))
    registry.register(web(2, "v2", "v1"))
    registry.register(web(3, name="db"))
    registry.register(ServiceRegistration(id="_herder-agent-x-4646", name="herder-client", address="127.0.0.1",
                                          port=4646))  # the agent's own: not a workload's
    text = render(plugin, context, '{{ range nomadServices }}{{ .Name }}={{ join "," .Tags }};{{ end }}')
    assert text == "db=;web=v1,v2;"


@pytest.mark.parametrize(("call", "message"), [
    ('nomadVar "nomad/jobs/x"', "nomadVar is not supported: herder has no Nomad variables store"),
    ('nomadVarList "nomad/jobs"', "nomadVarList is not supported"),
    ('nomadVarExists "x"', "nomadVarExists is not supported"),
    ('nomadService "bad name!"', "nomad.service: invalid format: 'bad name!'"),
    ('nomadService "x" "y"', "expected arguments <service> or <count> <key> <service>"),
    ('nomadService "2" "k" "web"', "expected integer for <count> argument"),
    # One region: another's services are not this agent's, whatever their names.
    ('nomadService "web@eu-west"', "nomad.service: no path to region 'eu-west' (herder's is 'global')"),
    ('nomadService 1 "k" "v1.web@eu-west"', "nomad.service: no path to region 'eu-west'"),
    ('nomadServices "@eu-west"', "nomad.services: no path to region 'eu-west'"),
])
def test_what_cannot_be_read_is_an_error_naming_the_function(
        plugin: TemplatesPlugin, context: Context, call: str, message: str) -> None:
    with pytest.raises(TemplateRenderError, match=r"template local/out: .*") as error:
        render(plugin, context, "{{ " + call + " }}")
    assert message in str(error.value)


def test_a_render_is_watched_on_the_registry(plugin: TemplatesPlugin, registry: LocalRegistry,
                                             context: Context) -> None:
    """What a render read is what the watcher compares: an instance that comes or goes is a change."""
    registry.register(web(1))
    _content, deps, _missing = plugin.render(
        Template(destination="local/out", data='{{ range nomadService "web" }}{{ .Port }}{{ end }}'), context.ctx)
    [(kind, arg)] = deps
    assert plugin.lookup(kind, arg, context.ctx) == deps[(kind, arg)]
    registry.deregister(web(1).id)
    assert plugin.lookup(kind, arg, context.ctx) != deps[(kind, arg)]
