"""What the Nomad integration (``herder_nomad``) needs of herder's core beside ``herder`` and ``herder.sdk``.

The plugin runs herder's task lifecycle inside Nomad's client: the lifecycle
and its config check, the state database it keeps its cleanups in, the
supervisor its tasks run under, and the resources and signals of its tasks.
Named here, and only here, so that the import contract can hold it to them.
"""

from herder.app.plugins import load_hooks
from herder.client.client import STATE_FILE
from herder.client.config import Config
from herder.client.deferred import DeferredCleanups
from herder.client.lifecycle import TaskLifecycle, config_errors
from herder.client.stats import StatsSampler
from herder.model import Resources
from herder.objects import parse_signal
from herder.plugins.hooks import Hooks
from herder.state import StateError, Store
from herder.supervisor import Supervisor

__all__ = ["STATE_FILE", "Config", "DeferredCleanups", "Hooks", "Resources", "StateError", "StatsSampler", "Store",
           "Supervisor", "TaskLifecycle", "config_errors", "load_hooks", "parse_signal"]
