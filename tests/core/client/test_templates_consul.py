"""Templates reading keys and services from a real Consul agent (``consul agent -dev``).

Skipped when no ``consul`` program is on PATH, failed when HERDER_REQUIRE names consul.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest

from herder.client.hooks.template_sources import ConsulCatalog, ConsulKV
from herder.client.hooks.templates import TemplatesConfig, TemplatesPlugin
from herder.model import Task, Template
from tests.core.client.artifact_support import Context
from tests.support.consul import ConsulAgent
from tests.support.waiting import TIMEOUT, wait_for


def _request(url: str, method: str = "GET", body: bytes | None = None) -> bytes:
    request = urllib.request.Request(url, data=body, method=method)
    with urllib.request.urlopen(request, timeout=2) as response:
        return bytes(response.read())


@pytest.fixture
def consul(own_consul: ConsulAgent) -> str:
    """The address of a Consul dev agent of the test's own."""
    return own_consul.address


def test_keys_and_services_come_from_consul(consul: str, tmp_path: Path) -> None:
    base = f"http://{consul}"
    _request(f"{base}/v1/kv/app/name", "PUT", b"shop")
    _request(f"{base}/v1/agent/service/register", "PUT", json.dumps(
        {"Name": "db", "ID": "db-1", "Address": "10.1.1.1", "Port": 5432, "Tags": ["primary"]}).encode())
    kv, catalog = ConsulKV(consul), ConsulCatalog(consul)
    try:
        assert kv.get("app/name") == "shop" and kv.get("app/none") is None
        [entry] = catalog.service("db")
        assert (entry.Address, entry.Port, entry.Tags, entry.Node) == ("10.1.1.1", 5432, ("primary",), "herder-test")
        assert catalog.service("db", "replica") == []
        assert [s.Name for s in catalog.services()] == ["consul", "db"]
    finally:
        kv.close()
        catalog.close()


def test_a_template_waits_for_a_consul_key(consul: str, tmp_path: Path) -> None:
    context = Context(tmp_path / "run")
    plugin = TemplatesPlugin(TemplatesConfig(poll_interval=0.1), kv=ConsulKV(consul), catalog=ConsulCatalog(consul))
    task = Task(name="t", driver="raw_exec", templates=(Template(
        destination="local/app.conf", data='port={{ key "app/port" }} {{ range service "web" }}{{ .Port }}{{ end }}'),))
    thread = threading.Thread(target=plugin.herder_task_prestart, args=(task, context.ctx))
    try:
        thread.start()
        wait_for(lambda: context.events, what="the template's first event")
        assert context.events[0].message == "Missing: kv.block(app/port), health.service(web)"
        _request(f"http://{consul}/v1/kv/app/port", "PUT", b"9000")
        _request(f"http://{consul}/v1/agent/service/register", "PUT",
                 json.dumps({"Name": "web", "ID": "web-1", "Port": 8080}).encode())
        thread.join(TIMEOUT)
        assert (context.task_dir / "local/app.conf").read_text() == "port=9000 8080"
    finally:
        plugin.close()
        thread.join(5)
