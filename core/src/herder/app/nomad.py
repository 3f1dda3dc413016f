"""What the Nomad integration (``herder_nomad``) needs of herder's core beside ``herder`` and ``herder.sdk``.

The plugin runs herder's task lifecycle inside Nomad's client: the lifecycle's
script and its steps, the allocation hooks' place around the scripts, the
state database it keeps its cleanups in, the supervisor its tasks run under,
and the resources and signals of its tasks.
Named here, and only here, so that the import contract can hold it to them.
"""

from herder.app.plugins import load_hooks
from herder.client.alloc_hooks import AllocHooks
from herder.client.client import STATE_FILE
from herder.client.config import Config
from herder.client.deferred import DeferredCleanups
from herder.client.lifecycle import TaskLifecycle
from herder.client.script import AwaitExit, Failed, Ran, Stepper, Stop, TaskScript, Woke, run_through
from herder.client.stats import StatsSampler
from herder.model import Resources
from herder.objects import parse_signal
from herder.plugins.hooks import Hooks
from herder.state import StateError, Store
from herder.supervisor import Supervisor

__all__ = [
    "STATE_FILE", "AllocHooks", "AwaitExit", "Config", "DeferredCleanups", "Failed", "Hooks", "Ran", "Resources",
    "StateError", "StatsSampler", "Stepper", "Stop", "Store", "Supervisor", "TaskLifecycle", "TaskScript",
    "Woke", "load_hooks", "parse_signal", "run_through"
]
