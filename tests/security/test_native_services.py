"""Native service discovery (``provider = "nomad"``) against what a job's author registers and renders.

A job may register thousands of services in the embedded registry (each task's ``service`` blocks, each
group's, a count of them). A template that walks them the way consul-template's examples do,
``range nomadServices`` then ``nomadService .Name`` for each, read the whole registry once per name: a
render of a few thousand services was past the render's CPU bound (so the template could not be
rendered at all), and the template watcher, which compares each dependency again every poll (outside
that bound), spent as long on every poll, holding the one watcher thread every task's templates share.

A rendezvous choice (``nomadService COUNT KEY NAME``) hashes every instance with the key, and the watcher
made it again on every poll though the registry had not changed.

A service's name and tags are the job's text, and ``herder service list`` / ``info`` printed them as they
were onto the operator's terminal: escape sequences in them were the terminal's to run.

The registry is a real :class:`LocalRegistry`, the one a client holds, written to as its sync loop
writes; ``tests/core/nomad_api/test_native_services.py`` runs the registry through a real agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks.template_sources import NativeCatalog
from herder.client.hooks.templates import TemplatesPlugin
from herder.model import Template
from herder.services import ServiceRegistration
from herder.services.local import LocalRegistry
from herder.services.native import NativeServices, Registration
from tests.core.client.artifact_support import Context
from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

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


TERMINAL_JOB = r'''
job "painter" {
  group "g" {
    network {
      port "http" {}
    }
    task "t" {
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
      service {
        name     = "web\u001b]0;owned\u0007\u001b[2J"
        port     = "http"
        tags     = ["\u001b[8mhidden", "plain", "\u202etxt.exe"]
        provider = "nomad"
        check {
          name     = "probe\u001b[1A\u001b[2K"
          type     = "tcp"
          interval = "10s"
          timeout  = "1s"
        }
      }
    }
  }
}
'''


def test_herder_service_shows_no_escape_sequence_of_a_job(tmp_path: Path) -> None:
    # A job's service name and tags carry a window-title sequence, a screen clear, concealed text and a
    # right-to-left override, its check's name a cursor move and a line erase; the operator runs
    # `herder service list`, `info` and `herder alloc status` on a terminal.
    agent = AgentProcess(tmp_path)
    agent.start()
    try:
        alloc_id = str(agent.submit(TERMINAL_JOB)["allocations"][0]["id"])
        agent.wait_task(alloc_id, "t")
        with agent.http() as http:
            wait_for(lambda: http.get("/v1/services").json()["services"], what="the service registered")
        name = "web\x1b]0;owned\x07\x1b[2J"
        listed = agent.cli("service", "list")
        info = agent.cli("service", "info", name)
        for shown in (listed, info):
            assert shown.returncode == 0, shown.stderr
            assert not any(char in shown.stdout for char in "\x1b\x07\u202e"), repr(shown.stdout)
            assert r"[\x1b[8mhidden,plain,\u202etxt.exe]" in shown.stdout
        assert r"web\x1b]0;owned\x07\x1b[2J  [" in listed.stdout
        assert info.stdout.splitlines()[1].startswith(f"painter  {alloc_id[:8]}")
        # `herder alloc status` shows the service's checks by service and check name.
        status = agent.cli("alloc", "status", alloc_id)
        assert status.returncode == 0, status.stderr
        assert "\x1b" not in status.stdout, repr(status.stdout)
        assert r"check web\x1b]0;owned\x07\x1b[2J/probe\x1b[1A\x1b[2K: " in status.stdout
        # The JSON is the job's text, escaped by JSON itself.
        assert json.loads(agent.cli("service", "list", "--json").stdout)["services"][0]["name"] == name
    finally:
        agent.shutdown()


def test_the_watcher_does_not_rank_again_what_did_not_change(
        plugin: TemplatesPlugin, registry: LocalRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A rendezvous choice hashes each instance with the key: with a thousand instances and a key of half a
    # megabyte (`replaceAll` makes one in a few steps), half a second a call. Under the render's CPU bound
    # a template makes a few such calls; the watcher made them all again on every poll, unbounded, for as
    # long as the allocation ran, in the thread every task's templates share.
    for index in range(50):
        registry.register(ServiceRegistration(
            id=f"_herder-task-alloc{index}-t-backend-http", name="backend", address="10.0.0.1",
            port=2000 + index, job_id="many", alloc_id=f"alloc{index}"))
    ctx = Context(tmp_path / "run").ctx
    data = ('{{ $k := replaceAll "y" "yyyyyyyyyyyyyyyy" "yyyyyyyyyyyyyyyy" }}'
            '{{ range $i := split "," "a,b,c" }}{{ range nomadService 2 (print $i $k) "backend" }}{{ .Port }} '
            '{{ end }}{{ end }}')
    content, deps, _missing = plugin.render(Template(destination="local/out", data=data), ctx)
    assert len(content.split()) == 6 and len(deps) == 3

    hashed: list[str] = []
    real = Registration.hash_with

    def counted(registration: Registration, key: str) -> str:
        hashed.append(key)
        return real(registration, key)

    monkeypatch.setattr(Registration, "hash_with", counted)
    for _poll in range(3):
        assert all(plugin.lookup(kind, arg, ctx) == value for (kind, arg), value in deps.items())
    assert hashed == [], f"{len(hashed)} instances ranked again for a registry that did not change"

    # A change is seen: the choice is made again, over what the registry now holds.
    registry.deregister("_herder-task-alloc0-t-backend-http")
    assert all(all(s.AllocID != "alloc0" for s in plugin.lookup(kind, arg, ctx)) for kind, arg in deps)
    assert len(hashed) == 3 * 49
