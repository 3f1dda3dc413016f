"""Consul Connect in job files: the sidecar task and port Nomad adds, overrides, and what is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from herder.jobspec import load_job, load_job_text
from herder.jobspec.connect import PROXY_MODE_VAR, PROXY_OPTION_VAR
from herder.jobspec.task_config import validate_task_configs
from herder.model import ExposePath, Lifecycle, PortSpec, Upstream
from tests.core.jobspec.helpers import load, problems
from tests.support.require import require

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "countdash.nomad"


def group(body: str, *, mode: str = "bridge", name: str = "api", tasks: str = "") -> str:
    return f"""
job "demo" {{
  group "{name}" {{
    network {{
      mode = "{mode}"
      port "http" {{ to = 9001 }}
    }}
{body}
    task "web" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
    }}
{tasks}
  }}
}}
"""


SIDECAR = """
    service {
      name = "count-api"
      port = "http"
      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "db"
              local_bind_port  = 5432
            }
            upstreams {
              destination_name = "cache"
              local_bind_port  = 6379
              datacenter       = "dc2"
            }
          }
        }
      }
    }
"""


def test_the_countdash_example_gets_a_sidecar_task_and_port_per_service() -> None:
    job = load_job(EXAMPLE)
    assert job.warnings == []
    api, dashboard = job.groups
    assert [task.name for task in api.tasks] == ["web", "connect-proxy-count-api"]
    proxy = api.tasks[1]
    assert proxy.kind == "connect-proxy:count-api"
    assert proxy.lifecycle == Lifecycle(hook="prestart", sidecar=True)
    assert proxy.driver == "raw_exec"
    assert proxy.config == {"command": "consul", "args": [
        "connect", f"${{{PROXY_MODE_VAR}}}", "-sidecar-for", "_herder-group-${NOMAD_ALLOC_ID}-api-count-api-9001",
        f"${{{PROXY_OPTION_VAR}}}"]}
    assert (proxy.resources.cpu, proxy.resources.memory, proxy.shutdown_delay) == (250, 128, 5.0)
    assert (proxy.logs.max_files, proxy.logs.max_file_size) == (2, 2)
    assert PortSpec(label="connect-proxy-count-api") in api.ports
    assert [port.label for port in dashboard.ports] == ["http", "connect-proxy-count-dashboard"]
    [service] = dashboard.services
    assert service.connect is not None and service.connect.sidecar is not None
    assert service.connect.sidecar.proxy.upstreams == (Upstream("count-api", 8080),)
    assert dashboard.upstreams == (Upstream("count-api", 8080),)


def test_upstreams_blocks_are_a_list_and_sidecar_service_port_names_a_port() -> None:
    job = load(group(SIDECAR.replace("sidecar_service {", 'sidecar_service {\n port = "proxy"\n tags = ["x"]')))
    [service] = job.groups[0].services
    assert service.connect is not None and service.connect.sidecar is not None
    sidecar = service.connect.sidecar
    assert (sidecar.port, sidecar.tags) == ("proxy", ("x",))
    assert sidecar.proxy.upstreams == (Upstream("db", 5432), Upstream("cache", 6379, datacenter="dc2"))
    # A label not declared is added, as Nomad's injectPort does.
    assert [port.label for port in job.groups[0].ports] == ["http", "proxy"]


def test_sidecar_task_overrides_the_default_task() -> None:
    override = """
        sidecar_task {
          name   = "envoy"
          driver = "docker"
          config { image = "envoyproxy/envoy:v1.18.3" }
          env { LEVEL = "debug" }
          resources { memory = 64 }
          kill_timeout = "2s"
        }
      }"""
    text = group(SIDECAR.replace("\n      }\n    }\n", override + "\n    }\n", 1))
    job = load_job_text(text, "hcl", "job.hcl")
    proxy = job.groups[0].tasks[-1]
    assert (proxy.name, proxy.driver, proxy.kind) == ("envoy", "docker", "connect-proxy:count-api")
    # Another driver than raw_exec starts from its own config, not the default's command line.
    assert proxy.config == {"image": "envoyproxy/envoy:v1.18.3"}
    assert proxy.env == {"LEVEL": "debug"}
    assert (proxy.resources.cpu, proxy.resources.memory, proxy.kill_timeout) == (250, 64, 2.0)
    assert proxy.lifecycle == Lifecycle(hook="prestart", sidecar=True)


def test_a_native_service_starts_no_sidecar_and_needs_no_namespace() -> None:
    job = load(group('service {\n name = "api"\n port = "http"\n connect { native = true }\n }', mode="host"))
    [service] = job.groups[0].services
    assert service.connect is not None and service.connect.native and service.connect.sidecar is None
    assert [task.name for task in job.groups[0].tasks] == ["web"]


def test_an_exposed_check_gets_a_port_and_a_path_of_the_proxy() -> None:
    check = '\n      check {\n type = "http"\n path = "/health"\n interval = "10s"\n timeout = "2s"\n expose = true\n }'
    job = load(group(SIDECAR.replace('port = "http"', 'port = "http"' + check, 1)))
    [service] = job.groups[0].services
    assert service.checks[0].port == "svc_count-api_ck_0"
    assert service.connect is not None and service.connect.sidecar is not None
    assert service.connect.sidecar.proxy.expose == (ExposePath("/health", 9001, "svc_count-api_ck_0"),)
    assert "svc_count-api_ck_0" in [port.label for port in job.groups[0].ports]


def test_connect_problems_name_their_path() -> None:
    assert problems(group(SIDECAR, mode="host")) == [
        'job.hcl:12: job.groups[0].services[0].connect: a Connect sidecar needs the group network mode "bridge" '
        "or \"cni/NAME\" (group 'api' has 'host')"]
    assert problems(group(SIDECAR.replace("count-api", "Count-API"))) == [
        "job.hcl:10: job.groups[0].services[0].name: a Connect service's name must not contain uppercase letters "
        "(Consul assumes it)"]
    assert problems(group(SIDECAR.replace("6379", "5432"))) == [
        "job.hcl:21: job.groups[0].services[0].connect.sidecar_service.proxy.upstreams[1].local_bind_port: "
        "127.0.0.1:5432 is the listener of another upstream of the group (of service 'count-api')"]
    assert problems(group(SIDECAR.replace("sidecar_service {", "native = true\n sidecar_service {"))) == [
        "job.hcl:12: job.groups[0].services[0].connect: a Connect service is native or has a sidecar_service, "
        "not both"]
    assert problems(group("", tasks='task "connect-proxy-count-api" {\n driver = "raw_exec"\n'
                                   ' config { command = "/bin/true" }\n }').replace(
        "    task", SIDECAR + "    task", 1)) == [
        "job.hcl:13: job.groups[0].services[0].connect.sidecar_task.name: the sidecar task "
        "'connect-proxy-count-api' has the name of another task of the group"]


def test_connect_is_only_for_group_services() -> None:
    text = group("", tasks='task "x" {\n driver = "raw_exec"\n config { command = "/bin/true" }\n'
                           ' service {\n name = "x"\n connect { native = true }\n }\n }')
    assert problems(text) == ["job.hcl:18: job.groups[0].tasks[1].services[0].connect: is only for the services "
                              "of a group (as in Nomad)"]


def test_a_gateway_beside_tasks_is_dropped_with_one_warning() -> None:
    job = load(group('service {\n name = "gw"\n connect {\n native = true\n gateway {\n proxy {}\n }\n }\n }'))
    assert job.warnings == ["ignoring stanzas herder does not implement: connect.gateway"]


def test_nomad_json_connect_reads_as_hcl() -> None:
    hcl = load_job(EXAMPLE)
    services = [{
        "Name": "count-dashboard", "PortLabel": "http", "Tags": None, "Checks": None, "TaskName": "",
        "Connect": {"Native": False, "Gateway": None, "SidecarTask": None, "SidecarService": {
            "Tags": None, "Port": "", "DisableDefaultTCPCheck": False, "Proxy": {
                "LocalServiceAddress": "", "LocalServicePort": 0, "Config": None, "ExposeConfig": None,
                "Upstreams": [{"DestinationName": "count-api", "LocalBindPort": 8080, "Datacenter": "",
                               "LocalBindAddress": "", "MeshGateway": {"Mode": ""}}]}}}}]
    job = {"Job": {"ID": "countdash", "TaskGroups": [{
        "Name": "dashboard",
        "Networks": [{"Mode": "bridge", "ReservedPorts": [{"Label": "http", "Value": 9002, "To": 9002}]}],
        "Services": services,
        "Tasks": [{"Name": "dashboard", "Driver": "raw_exec",
                   "Env": {"COUNTING_SERVICE_URL": "http://${NOMAD_UPSTREAM_ADDR_count_api}"},
                   "Config": {"command": "busybox", "args": ["sh", "-c", "exec sleep 3600"]}}]}]}}
    loaded = load_job_text(json.dumps(job), "json", "job.json")
    assert loaded.groups[0].services == hcl.groups[1].services
    assert [task.name for task in loaded.groups[0].tasks] == ["dashboard", "connect-proxy-count-dashboard"]


def test_the_json_nomads_command_line_sends_for_the_example_is_the_same_job() -> None:
    """``nomad job run`` parses the file itself and sends Nomad's API structs, every field filled."""
    nomad = shutil.which("nomad")
    require("nomad", nomad is not None, "no nomad on PATH")
    assert nomad is not None
    sent = subprocess.run([nomad, "job", "run", "-output", str(EXAMPLE)], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    from_json, from_hcl = load_job_text(sent, "json", "job.json"), load_job(EXAMPLE)
    assert [group.services for group in from_json.groups] == [group.services for group in from_hcl.groups]
    assert [[task.name for task in group.tasks] for group in from_json.groups] == \
        [["web", "connect-proxy-count-api"], ["dashboard", "connect-proxy-count-dashboard"]]


def test_a_sidecar_whose_driver_is_disabled_is_named_by_its_service() -> None:
    """In the agent raw_exec is off unless enabled: the sidecar herder adds is named where the file has it."""
    job = load_job(EXAMPLE)
    found = validate_task_configs(job, {}, {"raw_exec": "disabled"})
    assert found[1] == f"{EXAMPLE}:27: job.groups[0].services[0].connect.sidecar_task.driver: " \
                       "driver 'raw_exec' is disabled"


def test_a_connect_service_without_a_name_gets_its_port_by_its_default_name() -> None:
    job = load(group(SIDECAR.replace('      name = "count-api"\n', "")))
    [service] = job.groups[0].services
    assert service.name == "demo-api"
    assert [port.label for port in job.groups[0].ports] == ["http", "connect-proxy-demo-api"]
    assert job.groups[0].tasks[-1].name == "connect-proxy-demo-api"
