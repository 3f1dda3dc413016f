"""Task event types, with Nomad's names: each name is written here once.

Drivers and plugins emit their own events through ``ctx.emit_event``; drivers
use :data:`DRIVER` for progress ("Downloading image busybox").
"""

from __future__ import annotations

RECEIVED = "Received"
TASK_SETUP = "Task Setup"
DOWNLOADING_ARTIFACTS = "Downloading Artifacts"
FAILED_ARTIFACT_DOWNLOAD = "Failed Artifact Download"
DRIVER = "Driver"
STARTED = "Started"
TERMINATED = "Terminated"
RESTARTING = "Restarting"
NOT_RESTARTING = "Not Restarting"
KILLING = "Killing"
KILLED = "Killed"
DRIVER_FAILURE = "Driver Failure"
SETUP_FAILURE = "Setup Failure"
FAILED_VALIDATION = "Failed Validation"
SIBLING_TASK_FAILED = "Sibling Task Failed"
LEADER_TASK_DEAD = "Leader Task Dead"
MAIN_TASKS_DEAD = "Main Tasks Dead"
"""The main tasks of the group are dead: its sidecars are killed."""
SIGNALING = "Signaling"
RESTART_SIGNAL = "Restart Signal"
TASK_HOOK_FAILED = "Task hook failed"
WAITING_FOR_SHUTDOWN_DELAY = "Waiting for shutdown delay"
REATTACHED = "Reattached"
"""herder's own: the task was found running after herder started again."""
UNSAFE_LOG_FILE = "Unsafe Log File"
"""herder's own: something not a log file (a link, say) was at a log file's name; it was removed, not followed."""
LOGS_DROPPED = "Logs Dropped"
"""herder's own: output could not be written to the log files (the disk is full, say) and is dropped rather than
blocking the task; details: ``stream``, and ``bytes`` (how many were dropped) once writing works again or the
output ends."""
STATE_WRITE_FAILED = "State Write Failed"
"""herder's own: the state database cannot be written (a full disk, say); what the task does from then on is
written once it can be, if herder still runs."""
DEPLOYMENT = "Deployment"
"""herder's own: what the deployment of the allocation's job version does ("1 of 3 allocations healthy",
"rolled back to version 2")."""

FAILURES = frozenset({
    DRIVER_FAILURE, SETUP_FAILURE, FAILED_VALIDATION, NOT_RESTARTING, TASK_HOOK_FAILED,
    FAILED_ARTIFACT_DOWNLOAD, SIBLING_TASK_FAILED, STATE_WRITE_FAILED,
})
"""The types a front end shows as a failure."""
ALLOC_DATA_MOVED = "Alloc Data Moved"
"""herder's own: the allocation started with the ``alloc/data`` of the one it replaces (``ephemeral_disk``'s
``sticky`` or ``migrate``); details: ``previous``, that allocation's ID."""
ALLOC_DATA_NOT_MOVED = "Alloc Data Not Moved"
"""herder's own: the ``alloc/data`` of the allocation it replaces could not be moved (the message says why); the
allocation starts with an empty one."""
