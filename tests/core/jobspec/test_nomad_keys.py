"""Every key Nomad 1.x accepts is known: implemented, or accepted with one warning naming it."""

from __future__ import annotations

import pytest

from herder.jobspec.build import RESTART_DEFAULTS
from herder.model import POSTSTOP, PRESTART, Lifecycle, NetworkDNS
from tests.core.jobspec.helpers import load, problems


def job(*, job: str = "", group: str = "", task: str = "", resources: str = "", network: str = "",
        service: str = "", check: str = "", template: str = "", artifact: str = "") -> str:
    """A minimal job with a snippet at each place a key may go."""
    checks = f'check {{\n type = "tcp"\n interval = "10s"\n timeout = "2s"\n {check}\n }}'
    return f"""
job "web" {{
  {job}
  group "app" {{
    {group}
    task "server" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
      {task}
      resources {{
        {resources}
        network {{
          port "http" {{}}
          {network}
        }}
      }}
      service {{
        port = "http"
        {service}
        {checks}
      }}
      template {{
        destination = "local/x"
        data = "x"
        {template}
      }}
      artifact {{
        source = "https://example.invalid/x"
        {artifact}
      }}
    }}
  }}
}}
"""


# (where, snippet, the name the warning gives)
KEYS = [
    ("job", "node_pool = \"default\"", "node_pool"),
    ("job", "ui {\n description = \"d\"\n link {\n label = \"l\"\n url = \"u\"\n }\n }", "ui"),
    ("job", "multiregion {\n strategy {\n max_parallel = 1\n }\n }", "multiregion"),
    ("job", "namespace = \"ops\"", "namespace"),
    ("job", "consul_token = \"x\"", "consul_token"),
    ("group", "shutdown_delay = \"5s\"", "group shutdown_delay"),
    ("task", "vault {\n policies = [\"p\"]\n }", "vault"),
    ("task", "consul {\n cluster = \"default\"\n }", "consul"),
    ("task", "csi_plugin {\n id = \"p\"\n type = \"node\"\n mount_dir = \"/csi\"\n }", "csi_plugin"),
    ("task", "action \"hello\" {\n command = \"/bin/echo\"\n }", "action"),
    ("task", "secret \"db\" {\n provider = \"nomad\"\n path = \"p\"\n }", "secret"),
    ("task", "schedule {\n cron {\n start = \"0 9 * * *\"\n end = \"0 17\"\n }\n }", "schedule"),
    ("task", "kind = \"connect-proxy:x\"", "kind"),
    ("resources", "device \"nvidia/gpu\" {\n count = 1\n }", "resources.device"),
    ("resources", "numa {\n affinity = \"prefer\"\n }", "resources.numa"),
    ("network", "hostname = \"web\"", "network.hostname"),
    ("network", "dns {\n servers = [\"1.1.1.1\"]\n }", "network.dns"),
    ("network", "mbits = 10", "network.mbits"),
    ("check", "success_before_passing = 2", "check.success_before_passing"),
    ("template", "change_script {\n command = \"/bin/true\"\n }", "template.change_script"),
    ("artifact", "insecure = true", "artifact.insecure"),
]


@pytest.mark.parametrize(("where", "snippet", "name"), KEYS, ids=[name for _, _, name in KEYS])
def test_a_nomad_key_is_accepted_with_one_warning_naming_it(where: str, snippet: str, name: str) -> None:
    loaded = load(job(**{where: snippet}))
    warnings = [w for w in loaded.warnings if w.startswith("ignoring stanzas")]
    assert warnings == [f"ignoring stanzas herder does not implement: {name}"]


def test_several_keys_are_named_in_one_warning_each_once() -> None:
    loaded = load(job(job='node_pool = "x"', group='vault {\n policies = ["p"]\n }', task="action \"a\" {\n"
                      ' command = "/bin/true"\n }', resources="numa {\n affinity = \"prefer\"\n }"))
    ignoring = [w for w in loaded.warnings if w.startswith("ignoring")]
    assert ignoring == ["ignoring stanzas herder does not implement: node_pool, vault, action, resources.numa"]


# Keys that mean nothing on one node (among nodes, or between a client and its servers)
ONE_NODE = [
    ("job", "priority = 70"),
    ("job", "all_at_once = true"),
    ("job", "migrate {\n max_parallel = 2\n }"),
    ("group", "migrate {\n max_parallel = 2\n }"),
    ("group", "max_client_disconnect = \"1h\""),
    ("group", "disconnect {\n lost_after = \"1h\"\n }"),
    ("group", "stop_after_client_disconnect = \"5m\""),
    ("group", "prevent_reschedule_on_lost = true"),
    ("task", "affinity {\n attribute = \"${node.class}\"\n value = \"x\"\n }"),
]


@pytest.mark.parametrize(("where", "snippet"), ONE_NODE, ids=[snippet.split()[0] for _, snippet in ONE_NODE])
def test_a_key_without_effect_on_one_node_is_accepted_without_a_warning(where: str, snippet: str) -> None:
    assert load(job(**{where: snippet})).warnings == []


def test_a_key_nomad_does_not_know_is_still_an_error() -> None:
    errors = problems(job(task='colour = "blue"'))
    assert any("job.groups[0].tasks[0].colour: unknown key 'colour'" in error for error in errors)


@pytest.mark.parametrize("mode", ["bridge", "cni/mynet", "none"])
def test_a_group_network_mode_is_kept_without_a_warning(mode: str) -> None:
    loaded = load(f"""
        job "web" {{
          group "app" {{
            network {{
              mode = "{mode}"
              hostname = "web-${{NOMAD_ALLOC_INDEX}}"
              dns {{
                servers = ["192.0.2.53"]
                searches = ["example.com"]
                options = ["ndots:2"]
              }}
              port "http" {{ to = 8080 }}
              port "same" {{ to = -1 }}
            }}
            task "server" {{
              driver = "raw_exec"
              config {{ command = "/bin/true" }}
            }}
          }}
        }}
    """)
    assert loaded.warnings == []
    network = loaded.groups[0].network
    assert (network.mode, network.isolated, network.hostname) == (mode, True, "web-${NOMAD_ALLOC_INDEX}")
    assert network.dns == NetworkDNS(servers=("192.0.2.53",), searches=("example.com",), options=("ndots:2",))
    assert [(port.label, port.to) for port in loaded.groups[0].ports] == [("http", 8080), ("same", None)]


def test_a_task_network_mode_runs_as_host_networking_with_a_warning() -> None:
    loaded = load(job(network='mode = "bridge"'))
    assert "task network mode bridge runs as host networking" in " ".join(loaded.warnings)


def test_an_unknown_network_mode_is_an_error() -> None:
    errors = problems(job(network='mode = "overlay"'))
    assert any("network.mode: 'overlay' is not one of host" in error for error in errors)
    errors = problems(job(group='network {\n mode = "overlay"\n }'))
    assert any("groups[0].network.mode: must be host, bridge, none or cni/NAME" in error for error in errors)


def test_memory_max_is_kept() -> None:
    loaded = load(job(resources="memory = 128\n memory_max = 512"))
    assert loaded.groups[0].tasks[0].resources.memory_max == 512


@pytest.mark.parametrize(("job_type", "like"), [("system", "service"), ("sysbatch", "batch")])
def test_system_job_types_take_the_restart_defaults_of_their_kind(job_type: str, like: str) -> None:
    loaded = load(job(job=f'type = "{job_type}"'))
    assert loaded.type == job_type
    policy = loaded.groups[0].restart
    assert (policy.attempts, policy.interval, policy.delay, policy.mode) == tuple(
        RESTART_DEFAULTS[like][key] for key in ("attempts", "interval", "delay", "mode"))


def test_lifecycle_blocks_are_read() -> None:
    loaded = load("""
        job "web" {
          group "app" {
            task "init" {
              driver = "raw_exec"
              config { command = "/bin/true" }
              lifecycle { hook = "prestart" }
            }
            task "main" {
              driver = "raw_exec"
              config { command = "/bin/true" }
            }
            task "cleanup" {
              driver = "raw_exec"
              config { command = "/bin/true" }
              lifecycle {
                hook    = "poststop"
                sidecar = true
              }
            }
          }
        }
    """)
    init, main, cleanup = loaded.groups[0].tasks
    assert init.lifecycle == Lifecycle(PRESTART) and not init.is_sidecar
    assert main.lifecycle is None and main.is_main
    assert cleanup.lifecycle == Lifecycle(POSTSTOP, sidecar=True) and not cleanup.is_sidecar


def test_a_lifecycle_block_needs_a_hook() -> None:
    errors = problems(job(task="lifecycle { sidecar = true }"))
    assert any("tasks[0].lifecycle.hook: is required" in error for error in errors)
