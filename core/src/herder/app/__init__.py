"""The use cases every front end shares, each family in a module of its own.

The command line and the agent only translate between their medium and
these: reading a job (:mod:`.reading`), describing drivers and plugins
(:mod:`.plugins`), running a job in the foreground and reaping what a dead
foreground run left behind (:mod:`.foreground`), and the agent's long-lived
client (:class:`Agent`, :mod:`.agent`), which puts together its jobs
(:mod:`.jobs`), its registered periodic and parameterized jobs (:mod:`.periodic`),
its allocations (:mod:`.allocations`) and its own service (:mod:`.service`).

The Nomad integration reaches herder only through ``herder``, ``herder.sdk``
and :mod:`herder.app.nomad`, which names what it needs of the core.
"""

from herder.app.agent import Agent
from herder.app.allocations import files, logs_dir, matching
from herder.app.errors import Conflict, NotFound, OutOfBounds
from herder.app.foreground import ForegroundRun, HealthLog, reap
from herder.app.jobs import job_status
from herder.app.periodic import Parent, dispatch_once
from herder.app.plugins import agent_config, driver_rows, failed_plugins, load_hooks, plugin_rows, plugin_tables
from herder.app.reading import canonical_document, evaluate_job, parse_variables, read_job, this_node, unplaced
from herder.app.service import SELF_CHECK_INTERVAL, SELF_CHECK_TTL

__all__ = ["SELF_CHECK_INTERVAL", "SELF_CHECK_TTL", "Agent", "Conflict", "ForegroundRun", "HealthLog", "NotFound",
           "OutOfBounds", "Parent", "agent_config", "canonical_document", "dispatch_once", "driver_rows",
           "evaluate_job", "failed_plugins", "files", "job_status", "load_hooks", "logs_dir", "matching",
           "parse_variables", "plugin_rows", "plugin_tables", "read_job", "reap", "this_node", "unplaced"]
