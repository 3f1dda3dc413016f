"""Services of real raw_exec tasks, in the embedded registry and in a real Consul."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.cli.render import summary
from herder.client.config import Config
from tests.support.consul import ConsulAgent
from tests.support.foreground import HerderRun
from tests.support.processes import processes_using
from tests.support.running import make_config, start_job
from tests.support.waiting import wait_for

SERVER = '["-c", "exec python3 -m http.server --bind 127.0.0.1 $NOMAD_PORT_http"]'


def web_job(checks: str = "", *, extra: str = "", tags: str = '["v1", "${NOMAD_ALLOC_INDEX}"]',
            restart: str = "") -> str:
    return f'''
job "web" {{
  group "app" {{
    {restart}
    task "server" {{
      driver = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args = {SERVER}
      }}
      resources {{
        network {{
          port "http" {{}}
        }}
      }}
      service {{
        name = "web-${{NOMAD_ALLOC_INDEX}}"
        port = "http"
        tags = {tags}
        meta {{ team = "${{NOMAD_JOB_NAME}}" }}
        {checks}
      }}
      {extra}
    }}
  }}
}}
'''


def script_check(name: str, script: str, *, interval: str = "0.5s", extra: str = "") -> str:
    script = script.replace('"', '\\"')
    return (f'check {{\n name = "{name}"\n type = "script"\n command = "/bin/sh"\n args = ["-c", "{script}"]\n'
            f' interval = "{interval}"\n timeout = "2s"\n {extra}\n }}\n')


def port_check(name: str, type: str) -> str:
    path = 'path = "/"' if type == "http" else ""
    return f'check {{\n name = "{name}"\n type = "{type}"\n {path}\n interval = "0.5s"\n timeout = "1s"\n }}\n'


@pytest.fixture(params=["local", "consul"])
def backend(request: pytest.FixtureRequest) -> Callable[[Path], Config]:
    """A configuration for each backend: the embedded registry, and the session's real Consul."""
    if request.param == "local":
        return make_config
    agent: ConsulAgent = request.getfixturevalue("consul")
    return lambda data_dir: dataclasses.replace(make_config(data_dir), services_backend="consul",
                                                consul={"address": agent.address})


def test_a_service_is_registered_after_start_and_gone_after_stop(data_dir: Path, consul: ConsulAgent) -> None:
    config = dataclasses.replace(make_config(data_dir), services_backend="consul",
                                 consul={"address": consul.address})
    run, wait = start_job(web_job(), data_dir, config=config)
    run.wait_for("Started", "server")
    alloc = run.runner.allocs[0]
    port = next(p for p in alloc.ports if p.label == "http")
    service_id = f"_herder-task-{alloc.alloc.id}-server-web-0-http"
    registered = wait_for(lambda: consul.services().get(service_id), what=f"{service_id} registered")
    assert (registered["Service"], registered["Address"], registered["Port"]) == ("web-0", "127.0.0.1", port.value)
    assert registered["Tags"] == ["v1", "0"] and registered["Meta"]["team"] == "web"
    run.runner.stop()
    assert wait() == "stopped"
    assert service_id not in consul.services()
    assert consul.catalog("web-0") == []


def test_services_are_deregistered_before_the_task_is_killed(data_dir: Path, consul: ConsulAgent,
                                                             tmp_path: Path) -> None:
    """Clients stop being sent traffic before the task stops: the task, on its stop
    signal, finds itself gone from the registry already."""
    seen, trapping = tmp_path / "seen", tmp_path / "trapping"
    trap = (f"trap 'curl -s {consul.url}/v1/agent/services > {seen}; exit 0' TERM; touch {trapping}; "
            "python3 -m http.server --bind 127.0.0.1 $NOMAD_PORT_http & wait")
    text = web_job(extra='kill_signal = "SIGTERM"').replace(SERVER, f'["-c", "{trap}"]')
    config = dataclasses.replace(make_config(data_dir), services_backend="consul",
                                 consul={"address": consul.address})
    run, wait = start_job(text, data_dir, config=config)
    run.wait_for("Started", "server")
    wait_for(lambda: any(s.startswith("_herder-task-") for s in consul.services()), what="the service registered")
    wait_for(trapping.exists, what="the task's shell to trap its stop signal")  # a loaded machine may lag
    run.runner.stop()
    wait()
    assert seen.exists() and "_herder-task-" not in seen.read_text()


@pytest.mark.parametrize("type", ["http", "tcp"])
def test_port_checks_turn_passing_in_both_backends(data_dir: Path, backend: Callable[[Path], Config],
                                                   type: str) -> None:
    run, wait = start_job(web_job(port_check("reachable", type)), data_dir, config=backend(data_dir))
    run.wait_for_health("reachable", "passing")
    run.runner.stop()
    wait()
    allocs = summary("stopped", run.runner.allocs, run.runner.health)["allocs"]
    checks = allocs[run.runner.allocs[0].alloc.id]["tasks"]["server"]["checks"]
    assert checks == [{"service": "web-0", "check": "reachable", "status": "passing"}]


def test_a_script_check_runs_inside_the_task_and_turns_critical_when_it_fails(
        data_dir: Path, backend: Callable[[Path], Config], tmp_path: Path) -> None:
    marker = tmp_path / "healthy"
    marker.touch()
    check = script_check("marker", f'test -f {marker} && echo "in $NOMAD_TASK_NAME" || exit 2')
    run, wait = start_job(web_job(check), data_dir, config=backend(data_dir))
    passing = run.wait_for_health("marker", "passing")
    assert run.health[passing].output == "in server\n"
    marker.unlink()
    run.wait_for_health("marker", "critical", after=passing)
    run.runner.stop()
    wait()


def test_a_script_check_exiting_1_is_a_warning(data_dir: Path) -> None:
    run, wait = start_job(web_job(script_check("degraded", "echo slow; exit 1")), data_dir)
    index = run.wait_for_health("degraded", "warning")
    assert run.health[index].output == "slow\n"
    run.runner.stop()
    wait()


def test_a_script_check_that_times_out_is_critical(data_dir: Path) -> None:
    check = script_check("slow", "sleep 30").replace('timeout = "2s"', 'timeout = "0.3s"')
    run, wait = start_job(web_job(check), data_dir)
    run.wait_for("Started", "server")
    services = next(p for p in run.runner.client.builtins if p.name == "services")
    alloc_id = run.runner.allocs[0].alloc.id
    checks = wait_for(lambda: (found := services.health(alloc_id).get("server")) and found[0]["output"] and found,
                      what="the check ran")
    assert checks[0]["status"] == "critical" and "timed out" in checks[0]["output"], checks
    run.runner.stop()
    wait()


def test_check_restart_restarts_an_unhealthy_task_against_its_restart_policy(
        data_dir: Path, backend: Callable[[Path], Config]) -> None:
    check = script_check("doomed", "exit 2", extra='check_restart {\n limit = 2\n grace = "1s"\n }')
    restart = 'restart {\n attempts = 1\n interval = "1h"\n delay = "0s"\n mode = "fail"\n }'
    run, wait = start_job(web_job(check, restart=restart), data_dir, config=backend(data_dir))
    signalled = run.wait_for("Restart Signal", "server", timeout=30)
    assert "doomed" in signalled.event.message
    # The one restart the policy allows is used up by the first, so the second fails the task.
    assert wait(60) == "failed"
    types = run.types("server")
    assert types.count("Restart Signal") == 2 and types.count("Started") == 2
    assert "Not Restarting" in types
    assert run.runner.allocs[0].tasks[0].status.restarts == 1


def test_check_restart_waits_out_the_grace_period(data_dir: Path) -> None:
    check = script_check("doomed", "exit 2", interval="0.2s",
                         extra='check_restart {\n limit = 1\n grace = "3s"\n }')
    run, wait = start_job(web_job(check), data_dir)
    started = run.wait_for("Started", "server").event.time
    signalled = run.wait_for("Restart Signal", "server", timeout=30).event.time
    assert (signalled - started).total_seconds() >= 3
    run.runner.stop()
    wait()


def test_consul_going_away_disturbs_no_task_and_services_return_after_it(
        data_dir: Path, own_consul: ConsulAgent, caplog: pytest.LogCaptureFixture) -> None:
    config = dataclasses.replace(make_config(data_dir), services_backend="consul",
                                 consul={"address": own_consul.address})
    run, wait = start_job(web_job(port_check("reachable", "tcp")), data_dir, config=config)
    run.wait_for_health("reachable", "passing")
    own_consul.stop()
    # Consul away long enough for herder to find it gone; what matters is what happens after it.
    wait_for(lambda: "service registry unreachable" in caplog.text, what="herder to find consul gone")
    own_consul.start()  # a dev agent starts empty: everything must be registered again
    wait_for(lambda: any(s.startswith("_herder-task-") for s in own_consul.services()), timeout=60,
             what="the services registered again")
    assert run.types("server").count("Started") == 1 and "Terminated" not in run.types("server")
    run.runner.stop()
    wait()


def test_a_task_starts_while_consul_is_down(data_dir: Path, own_consul: ConsulAgent) -> None:
    own_consul.stop()
    config = dataclasses.replace(make_config(data_dir), services_backend="consul",
                                 consul={"address": own_consul.address})
    run, wait = start_job(web_job(), data_dir, config=config)
    run.wait_for("Started", "server")
    run.runner.stop()
    assert wait() == "stopped"


def test_a_herder_killed_outright_leaves_no_stale_service_after_the_next_start(
        tmp_path: Path, data_dir: Path, config_file: Path, consul: ConsulAgent) -> None:
    config_file.write_text(config_file.read_text() + f'[services]\nbackend = "consul"\n'
                                                      f'[consul]\naddress = "{consul.address}"\n')
    job = tmp_path / "web.hcl"
    job.write_text(web_job())
    first = HerderRun(job, data_dir, "--keep", config=config_file)
    first.wait_for("Started")
    stale = wait_for(lambda: [s for s in consul.services() if s.startswith("_herder-task-")],
                     what="the service registered")
    # herder, its supervisor and the task all die at once, as when every process of the host is killed.
    for pid in processes_using(data_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    first.finish()
    assert set(stale) <= set(consul.services()), "nobody is left to deregister it"
    other = tmp_path / "other.hcl"
    other.write_text('job "other" {\n type = "batch"\n group "g" {\n task "t" {\n driver = "raw_exec"\n'
                     ' config {\n command = "/bin/true"\n }\n }\n }\n}\n')
    second = HerderRun(other, data_dir, config=config_file)
    second.finish()
    assert second.proc.returncode == 0, second.stderr
    assert not set(stale) & set(consul.services())


GROUP_JOB = '''
job "shop" {
  group "front" {
    network {
      port "http" {}
    }
    service {
      name = "shop-${NOMAD_ALLOC_INDEX}"
      port = "http"
      check {
        name = "listening"
        type = "tcp"
        interval = "0.5s"
        timeout = "1s"
      }
      check {
        name = "in-sidecar"
        type = "script"
        task = "sidecar"
        command = "/bin/sh"
        args = ["-c", "echo from $NOMAD_TASK_NAME"]
        interval = "0.5s"
        timeout = "2s"
      }
    }
    task "server" {
      driver = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sh"
        args = ["-c", "exec python3 -m http.server --bind 127.0.0.1 $NOMAD_PORT_http"]
      }
    }
    task "sidecar" {
      driver = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sh"
        args = ["-c", "exec sleep 300"]
      }
    }
  }
}
'''


def test_a_group_service_uses_the_group_port_and_runs_its_script_check_in_the_named_task(
        data_dir: Path, consul: ConsulAgent) -> None:
    config = dataclasses.replace(make_config(data_dir), services_backend="consul",
                                 consul={"address": consul.address})
    run, wait = start_job(GROUP_JOB, data_dir, config=config)
    run.wait_for_health("listening", "passing")
    index = run.wait_for_health("in-sidecar", "passing")
    assert run.health[index].output == "from sidecar\n" and run.health[index].task == "sidecar"
    alloc = run.runner.allocs[0]
    port = next(p for p in alloc.ports if p.label == "http")
    service_id = f"_herder-group-{alloc.alloc.id}-front-shop-0-http"
    assert consul.services()[service_id]["Port"] == port.value
    run.runner.stop()
    assert wait() == "stopped"
    assert service_id not in consul.services()


def test_a_template_reads_a_service_from_the_embedded_registry(data_dir: Path) -> None:
    text = '''
job "pair" {
  group "g" {
    task "db" {
      driver = "raw_exec"
      kill_timeout = "1s"
      config {
        command = "/bin/sh"
        args = ["-c", "exec sleep 300"]
      }
      resources {
        network {
          port "db" {}
        }
      }
      service {
        name = "db"
        port = "db"
      }
    }
    task "app" {
      driver = "raw_exec"
      kill_timeout = "1s"
      template {
        destination = "local/db.txt"
        data = "{{ range service \\"db\\" }}{{ .Address }}:{{ .Port }}{{ end }}"
      }
      config {
        command = "/bin/sh"
        args = ["-c", "cat local/db.txt; echo; exec sleep 300"]
      }
    }
  }
}
'''
    run, wait = start_job(text, data_dir)
    run.wait_for("Started", "app", timeout=30)
    alloc = run.runner.allocs[0]
    port = next(p for p in alloc.ports if p.label == "db")
    app = next(t for t in alloc.tasks if t.name == "app")
    assert (app.ctx.task_dir.local_dir / "db.txt").read_text() == f"127.0.0.1:{port.value}"
    run.runner.stop()
    wait()
