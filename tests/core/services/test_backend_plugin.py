"""A third service registry is a plugin: an entry point in ``herder.service_backends``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.errors import ConfigError
from herder.services import check_backend
from tests.support.running import make_config, start_job
from tests.support.waiting import wait_for

# A registry that writes what it holds to a file: enough to see herder drive it.
FILE_REGISTRY = '''
import json
from pathlib import Path

from herder.services import RegisteredService, RegistryView


class FileRegistry:
    name = "file"

    def __init__(self, config, owner):
        self.path = Path(config["path"])
        self.session = owner.session
        self.services = {}
        self._write()

    def _write(self):
        self.path.write_text(json.dumps(sorted(self.services)))

    def read(self):
        return RegistryView({sid: RegisteredService(s.fingerprint(), self.session)
                             for sid, s in self.services.items()}, {})

    def register(self, service):
        self.services[service.id] = service
        self._write()

    def deregister(self, service_id):
        self.services.pop(service_id, None)
        self._write()

    def update_ttl(self, check_id, status):
        pass

    def close(self):
        pass
'''

JOB = '''
job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      kill_timeout = "1s"
      config {
        command = "/bin/sh"
        args = ["-c", "exec sleep 300"]
      }
      service {
        name = "web"
      }
    }
  }
}
'''


def test_a_registry_from_a_plugin_gets_the_services(install: Callable[..., Path], data_dir: Path,
                                                    tmp_path: Path) -> None:
    install("herder-file-registry", "0.1", {"herder.service_backends": {"file": "file_registry:FileRegistry"}},
            {"file_registry.py": FILE_REGISTRY})
    held = tmp_path / "registry.json"
    config = dataclasses.replace(make_config(data_dir, plugin={"file": {"path": str(held)}}),
                                 services_backend="file")
    run, wait = start_job(JOB, data_dir, config=config)
    run.wait_for("Started", "server")
    alloc_id = run.runner.allocs[0].alloc.id
    # The sync loop runs at once after the start, in its own thread.
    registered = wait_for(lambda: json.loads(held.read_text()), what="the service in the plugin's registry")
    assert registered == [f"_herder-task-{alloc_id}-server-web-"]
    run.runner.stop()
    wait()
    assert json.loads(held.read_text()) == []


def test_an_unknown_backend_is_a_configuration_error_naming_the_installed_ones() -> None:
    with pytest.raises(ConfigError, match=r"no service registry 'etcd' is installed \(installed: consul, local"):
        check_backend("etcd")
