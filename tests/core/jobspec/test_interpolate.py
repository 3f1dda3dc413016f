"""Runtime interpolation of ${...} references."""

from __future__ import annotations

from herder.jobspec import interpolate, interpolate_task, task_lookup
from herder.model import Artifact, Check, Service, Task, Template

NODE = {"attr.driver.docker.version": "24.0.7", "attr.kernel.name": "linux", "node.unique.name": "node-1",
        "node.datacenter": "dc7", "meta.zone": "z1"}
LOOKUP = task_lookup(
    env={"NOMAD_PORT_http": "23456", "HERDER_TASK_NAME": "server", "GREETING": "hi"},
    node=NODE.get,
    meta={"rack": "r12", "zone": "job's"},
)


def test_references_of_every_kind() -> None:
    references = ["NOMAD_PORT_http", "HERDER_TASK_NAME", "GREETING", "attr.kernel.name", "node.unique.name"]
    text = " ".join(f"${{{name}}}" for name in [*references, "node.datacenter", "meta.rack"])
    assert interpolate(text, LOOKUP) == "23456 server hi linux node-1 dc7 r12"


def test_the_nodes_meta_comes_before_the_jobs() -> None:
    assert interpolate("${meta.zone}", LOOKUP) == "z1"


def test_unknown_references_are_left_as_written() -> None:
    text = "${NOMAD_PORT_db} ${attr.nope} ${meta.nope} ${node.class} ${ spaced } $NOMAD_PORT_http ${"
    assert interpolate(text, LOOKUP) == text


def test_whitespace_inside_a_reference_is_ignored() -> None:
    assert interpolate("${ NOMAD_PORT_http }", LOOKUP) == "23456"


def test_nested_values() -> None:
    value = {"args": ["-p", "${NOMAD_PORT_http}"], "pair": ("${GREETING}", 3), "n": 5, "flag": True, "none": None}
    assert interpolate(value, LOOKUP) == {
        "args": ["-p", "23456"],
        "pair": ("hi", 3),
        "n": 5,
        "flag": True,
        "none": None,
    }


def test_interpolate_task_covers_every_field_and_copies() -> None:
    task = Task(
        name="server",
        driver="docker",
        config={"image": "app:${meta.rack}", "port_map": {"http": 8080}},
        env={"ADDR": "${node.unique.name}:${NOMAD_PORT_http}"},
        meta={"dc": "${node.datacenter}"},
        services=(
            Service(
                name="${HERDER_TASK_NAME}-web",
                port="${GREETING}",
                tags=("v-${attr.driver.docker.version}",),
                meta={"m": "${meta.rack}"},
                checks=(
                    Check(
                        type="script",
                        name="c-${GREETING}",
                        command="/bin/${GREETING}",
                        args=("${NOMAD_PORT_http}",),
                        path="/${GREETING}",
                        header={"X": ("${meta.rack}",)},
                    ),
                ),
            ),
        ),
        artifacts=(
            Artifact(
                source="https://x/${attr.kernel.name}.tgz",
                destination="local/${GREETING}",
                options={"checksum": "${meta.rack}"},
            ),
        ),
        templates=(
            Template(destination="local/${GREETING}.conf", source="local/${meta.rack}.tpl", data="${GREETING}"),
        ),
    )
    done = interpolate_task(task, LOOKUP)
    assert done is not task and task.env == {"ADDR": "${node.unique.name}:${NOMAD_PORT_http}"}
    assert done.config == {"image": "app:r12", "port_map": {"http": 8080}}
    assert done.env == {"ADDR": "node-1:23456"}
    assert done.meta == {"dc": "dc7"}
    service = done.services[0]
    assert (service.name, service.port, service.tags, service.meta) == ("server-web", "hi", ("v-24.0.7",), {"m": "r12"})
    check = service.checks[0]
    assert (check.name, check.command, check.args) == ("c-hi", "/bin/hi", ("23456",))
    assert (check.path, check.header) == ("/hi", {"X": ("r12",)})
    artifact = done.artifacts[0]
    assert (artifact.source, artifact.destination, artifact.options) == (
        "https://x/linux.tgz",
        "local/hi",
        {"checksum": "r12"},
    )
    template = done.templates[0]
    assert (template.destination, template.source, template.data) == ("local/hi.conf", "local/r12.tpl", "${GREETING}")
