"""Services of docker tasks in a real Consul: script checks inside the container, the driver's address."""

from __future__ import annotations

from tests.support.consul import ConsulAgent
from tests.support.waiting import wait_for

from .helpers import DockerJobs, containers_of, docker_job, job_name, sh


def checked_job(name: str, script: str, *, address_mode: str = "host") -> dict[str, object]:
    return docker_job(
        name, sh("exec httpd -f -p 8080 -h /local", port_map={"http": 8080}), kill_timeout="1s",
        ports=[{"label": "http"}],
        services=[{
            "name": name, "port": "http", "address_mode": address_mode,
            "checks": [{"name": "inside", "type": "script", "command": "sh", "args": ["-c", script],
                        "interval": "0.5s", "timeout": "3s"}],
        }],
    )


def test_a_script_check_runs_in_the_container_and_its_ttl_check_follows_it(
        jobs: DockerJobs, consul: ConsulAgent) -> None:
    script = "test -f /local/healthy || exit 2; echo inside; ls /"
    run, wait = jobs.start(checked_job(job_name("scripted"), script), services_backend="consul",
                           consul={"address": consul.address})
    run.wait_for("Started", "t")
    task_dir = run.runner.allocs[0].tasks[0].ctx.task_dir
    (task_dir.local_dir / "healthy").write_text("yes\n")
    passing = run.wait_for_health("inside", "passing")
    # The container's root: its own task dirs, not the host's directories.
    listing = run.health[passing].output.split()
    assert listing[0] == "inside" and {"alloc", "local", "secrets"} <= set(listing)
    [check] = [c for c in consul.checks().values() if c["Name"] == "inside"]
    assert check["Type"] == "ttl" and check["Status"] == "passing" and check["Output"].startswith("inside\n")
    (task_dir.local_dir / "healthy").unlink()
    run.wait_for_health("inside", "critical", after=passing)
    wait_for(lambda: next(c for c in consul.checks().values() if c["Name"] == "inside")["Status"] == "critical",
             what="the check 'inside' critical")
    run.runner.stop()
    wait()
    assert not [c for c in consul.checks().values() if c["Name"] == "inside"]


def test_address_mode_driver_advertises_the_container_address_and_port(
        jobs: DockerJobs, consul: ConsulAgent) -> None:
    name = job_name("driver-address")
    run, wait = jobs.start(checked_job(name, "true", address_mode="driver"), services_backend="consul",
                           consul={"address": consul.address})
    run.wait_for("Started", "t")
    [container] = containers_of(jobs.client, run.runner.allocs[0].alloc.id)
    container_ip = container.attrs["NetworkSettings"]["IPAddress"]
    assert container_ip
    wait_for(lambda: any(s["Service"] == name for s in consul.services().values()), what=f"{name} registered")
    [service] = [s for s in consul.services().values() if s["Service"] == name]
    assert (service["Address"], service["Port"]) == (container_ip, 8080)
    run.runner.stop()
    wait()
