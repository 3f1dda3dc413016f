"""Nomad stanzas herder does not implement: dropped with one warning (affinity and spread: silently)."""

from __future__ import annotations

from .helpers import load, problems


def test_unimplemented_stanzas_are_dropped_with_one_warning() -> None:
    job = load("""
        job "web" {
          priority    = 50
          all_at_once = false
          constraint {
            attribute = "${attr.kernel.name}"
            value     = "linux"
          }
          constraint {
            attribute = "${attr.cpu.arch}"
            value     = "amd64"
          }
          group "app" {
            ephemeral_disk { size = 300 }
            spread { attribute = "${node.datacenter}" }
            volume "data" {
              type   = "host"
              source = "data"
            }
            task "server" {
              driver = "raw_exec"
              vault { policies = ["read"] }
              volume_mount {
                volume      = "data"
                destination = "/data"
              }
              resources {
                network {
                  mbits = 10
                }
              }
            }
          }
        }
    """)
    names = ["vault", "network.mbits"]  # priority, all_at_once: no effect on one node, silently
    assert job.warnings == [f"ignoring stanzas herder does not implement: {', '.join(names)}"]


def test_the_same_names_elsewhere_are_unknown_keys() -> None:
    errors = problems("""
        job "web" {
          task "server" {
            driver = "raw_exec"
            ephemeral_disk { size = 300 }
            config {
              periodic = true
            }
          }
        }
    """)
    assert any("tasks[0].ephemeral_disk: unknown key 'ephemeral_disk'" in error for error in errors), errors


def test_yaml_jobs_may_carry_them_too() -> None:
    job = load(
        """
        job:
          name: web
          vault: {policies: [read]}
          migrate: {max_parallel: 1}
          groups:
            - name: app
              reschedule: {attempts: 0}
              tasks: [{name: t, driver: raw_exec, affinity: {attribute: x}}]
    """,
        "yaml",
    )
    assert job.warnings == ["ignoring stanzas herder does not implement: vault"]  # migrate, affinity: silently


def test_a_job_without_them_has_no_warning() -> None:
    assert load('job "web" {\n  task "t" { driver = "raw_exec" }\n}').warnings == []
