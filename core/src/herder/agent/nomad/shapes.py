"""The agent's state in Nomad's API shapes: its node, jobs, allocations, evaluations and deployments."""

from __future__ import annotations

import functools
import json
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path as FilePath
from typing import Any

from fastapi import Request

from herder import app
from herder.agent.nomad import models, resources
from herder.agent.nomad.ledger import SECOND, Evaluation, Ledger
from herder.agent.nomad.memo import Encoded, Memo
from herder.app import Agent, NotFound
from herder.client.alloc_runner import MAX_RUN_DURATION_EXCEEDED, AllocRunner
from herder.client.deployments import Deployment
from herder.client.feasibility import DATACENTER, DIMENSION, Unplaced
from herder.client.node import NOMAD_VERSION, REGION, node_id
from herder.errors import JobError
from herder.jobspec.nomad_json import to_nomad
from herder.jobspec.nomad_structs import normalized
from herder.jobspec.task_config import merge_blocks
from herder.model import Job
from herder.objects import TaskEvent, TaskStats

NAMESPACE = "default"

JOB_DEFAULTS: dict[str, Any] = {"Region": REGION, "Namespace": NAMESPACE, "Priority": 50, "AllAtOnce": False}
"""What a Nomad server fills in a job that leaves it out (:meth:`Shapes.job_document` does too), and
so reads as unset in a job given: ``nomad job inspect``'s output sent back is the same job."""
CLIENT_DESCRIPTION = {"pending": "No tasks have started", "running": "Tasks are running",
                      "complete": "All tasks have completed", "failed": "Failed tasks"}
"""Nomad's description of each ``ClientStatus``."""
ALLOC_STATUS = {"pending": "pending", "running": "running", "complete": "complete", "failed": "failed",
                "stopped": "complete"}
"""herder's allocation status as Nomad's ClientStatus (a stopped allocation is complete, desired stop)."""


class NomadError(Exception):
    """An answer in Nomad's form: a status code and a plain-text message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def foreign(request: Request) -> bool:
    """Whether the request asks for a namespace other than ``default`` (``*`` is every one)."""
    return request.query_params.get("namespace", NAMESPACE) not in (NAMESPACE, "*", "")


def _same(value: Any, default: Any) -> bool:
    return type(value) is type(default) and value == default


def multierror(errors: list[str]) -> str:
    """``errors`` as Nomad writes several (Go's ``multierror``): a count, then one line each."""
    count = len(errors)
    return f"{count} error{'s' if count != 1 else ''} occurred:\n" + "".join(f"\t* {e}\n" for e in errors)


def nanoseconds(epoch: float | None) -> int:
    return 0 if epoch is None else int(epoch * SECOND)


def rfc3339(epoch: float | None) -> str:
    return models.ZERO_TIME if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + \
        f".{int(epoch % 1 * 1e9):09d}Z"


AllocShape = Callable[["Shapes", AllocRunner], Any]
"""A method of :class:`Shapes` that shapes an allocation."""


def kept(signature: Callable[[Shapes, AllocRunner], object]) -> Callable[[AllocShape], Callable[
        [Shapes, AllocRunner], Encoded]]:
    """A shape of an allocation (a method of :class:`Shapes`), encoded and kept while ``signature`` of the
    allocation is the same (:mod:`.memo`)."""

    def decorate(shape: AllocShape) -> Callable[[Shapes, AllocRunner], Encoded]:
        @functools.wraps(shape)
        def kept_shape(self: Shapes, alloc: AllocRunner) -> Encoded:
            return self.memo.get((shape.__name__, alloc.alloc.id), signature(self, alloc), lambda: shape(self, alloc))

        return kept_shape

    return decorate


def allocation_metric(unplaced: Unplaced, datacenter: str) -> models.AllocationMetric:
    """Why the node (in ``datacenter``) did not take a group, as Nomad's ``AllocationMetric``."""
    refusal = unplaced.refusal
    coalesced = max(0, unplaced.failed - 1)
    if refusal.kind == DATACENTER:
        return models.AllocationMetric(NodesEvaluated=0, NodesAvailable=dict.fromkeys(unplaced.datacenters, 0),
                                       CoalescedFailures=coalesced)
    if refusal.kind == DIMENSION:
        return models.AllocationMetric(NodesAvailable={datacenter: 1}, NodesExhausted=1,
                                       DimensionExhausted={refusal.reason: 1}, CoalescedFailures=coalesced)
    return models.AllocationMetric(NodesFiltered=1, NodesAvailable={datacenter: 1},
                                   ConstraintFiltered={refusal.reason: 1}, CoalescedFailures=coalesced)


class Shapes:
    """The agent's state in Nomad's shapes."""

    def __init__(self, agent: Agent, ledger: Ledger, address: str) -> None:
        self.agent = agent
        self.ledger = ledger
        self.address = address
        # A stable ID for this node: the same agent on the same data dir is the same node.
        self.node_id = node_id(agent.config.node_name, agent.config.data_dir)
        self.memo = Memo()

    # -- the node ------------------------------------------------------------------

    def check_node(self, node_id: str) -> None:
        if node_id != self.node_id:
            raise NomadError(404, "node not found")

    def drivers(self) -> dict[str, models.DriverInfo]:
        now = rfc3339(time.time())
        return {row["name"]: models.DriverInfo(Attributes=row["attributes"], Detected=row["detected"],
                                               Healthy=row["healthy"], HealthDescription=row["description"],
                                               UpdateTime=now)
                for row in app.driver_rows(self.agent.hooks)}

    def node_stub(self) -> models.NodeListStub:
        return models.NodeListStub(**self._node_fields())

    def node(self) -> models.Node:
        drivers = self.drivers()
        node = self.agent.node()
        attributes = {**node.attributes, "herder.version": self.agent.version}
        return models.Node(**self._node_fields(drivers), HTTPAddr=self.address, Resources=self.node_resources(),
                           Meta=dict(node.meta),
                           DrainStrategy=self.drain_strategy(),
                           TLSEnabled=self.agent.config.tls.cert_file is not None,
                           Attributes=dict(sorted(attributes.items())),
                           HostVolumes={name: {"Name": name, "Path": str(volume.path), "ReadOnly": volume.read_only}
                                        for name, volume in sorted(self.agent.config.client.host_volumes.items())})

    def _node_fields(self, drivers: dict[str, models.DriverInfo] | None = None) -> dict[str, Any]:
        return {"ID": self.node_id, "Name": self.agent.config.node_name,
                "NodeClass": self.agent.config.client.node_class,
                "Datacenter": self.agent.config.datacenter, "Address": self.address.rpartition(":")[0],
                "Version": NOMAD_VERSION, "Drivers": self.drivers() if drivers is None else drivers,
                "Status": "ready", "Drain": self.agent.drain_pending(),
                "SchedulingEligibility": "eligible" if self.agent.eligible else "ineligible",
                "CreateIndex": 1, "ModifyIndex": 1}

    def drain_strategy(self) -> dict[str, Any] | None:
        """Nomad's DrainStrategy while a drain stops allocations; None once they all stopped (Nomad's drain
        complete). herder's drain stops every allocation at once: no deadline."""
        started = self.agent.drain_started
        if started is None or not self.agent.drain_pending():
            return None
        return {"Deadline": 0, "IgnoreSystemJobs": False, "ForceDeadline": models.ZERO_TIME,
                "StartedAt": rfc3339(started)}

    def node_resources(self) -> models.Resources:
        """The host's CPU (MHz: herder does not measure clock speeds, so 1000 a core, unless a
        fingerprint says ``cpu.totalcompute``), memory and the data dir's disk."""
        attributes = self.agent.node().attributes
        cores = int(attributes.get("cpu.numcores", "1"))
        disk = os.statvfs(self.agent.config.data_dir)
        return models.Resources(CPU=int(attributes.get("cpu.totalcompute", cores * 1000)), Cores=cores,
                                MemoryMB=int(attributes.get("memory.totalbytes", "0")) >> 20,
                                DiskMB=disk.f_blocks * disk.f_frsize >> 20)

    def host_stats(self) -> models.HostStats:
        """The host's memory, the data dir's disk and the uptime (no per-CPU figures)."""
        meminfo = {line.split(":")[0]: int(line.split()[1]) << 10
                   for line in FilePath("/proc/meminfo").read_text().splitlines() if line.split()[1:]}
        disk = os.statvfs(self.agent.config.data_dir)
        size, free = disk.f_blocks * disk.f_frsize, disk.f_bavail * disk.f_frsize
        used = size - disk.f_bfree * disk.f_frsize
        return models.HostStats(
            Memory=models.HostMemoryStats(Total=meminfo.get("MemTotal", 0), Available=meminfo.get("MemAvailable", 0),
                                          Free=meminfo.get("MemFree", 0),
                                          Used=meminfo.get("MemTotal", 0) - meminfo.get("MemAvailable", 0)),
            DiskStats=[models.HostDiskStats(Mountpoint=str(self.agent.config.data_dir), Size=size, Used=used,
                                            Available=free, UsedPercent=100.0 * used / size if size else 0.0)],
            Uptime=int(float(FilePath("/proc/uptime").read_text().split()[0])), Timestamp=time.time_ns())

    def usage(self, sampled: Mapping[str, TaskStats | None]) -> models.AllocResourceUsage:
        """The allocation's tasks' resource usage (what a driver cannot tell is 0), and their sum."""
        node = self.node_resources()
        return resources.usage(sampled, mhz=node.CPU / max(1, node.Cores))

    def agent_self(self) -> dict[str, Any]:
        """``/v1/agent/self``: the agent as a Nomad agent that is its region's one server and client; the
        version is the one of Nomad's API it speaks, herder's own beside it (``HerderVersion``, ``herder``)."""
        config = self.agent.config
        return {
            "config": {"Region": REGION, "Datacenter": config.datacenter, "NodeName": config.node_name,
                       "Version": {"Version": NOMAD_VERSION, "VersionPrerelease": "", "VersionMetadata": "",
                                   "Revision": ""},
                       "HerderVersion": self.agent.version,
                       "Client": {"Enabled": True}, "Server": {"Enabled": False}, "ACL": {"Enabled": False}},
            "member": self.member(),
            "stats": {
                "client": {"node_id": self.node_id, "known_servers": self.address,
                           "num_allocations": str(len(self.agent.allocs()))},
                "nomad": {"server": "false", "leader": "true", "leader_addr": self.address, "known_regions": "1",
                          "bootstrap": "true"},
                "runtime": {"version": f"python{platform.python_version()}", "arch": platform.machine(),
                            "kernel.name": platform.system().lower(), "cpu_count": str(os.cpu_count() or 1),
                            "max_procs": str(os.cpu_count() or 1)},
                "herder": {"version": self.agent.version, "node": config.node_name,
                           "data_dir": str(config.data_dir)},
            },
        }

    def member(self) -> dict[str, Any]:
        """The agent as the one member of its region's gossip pool (``nomad server members``): its tags say
        where it answers (the leader is the member at ``rpc_addr:port``, ``/v1/status/leader``)."""
        config = self.agent.config
        host, _, port = self.address.rpartition(":")
        return {"Name": f"{config.node_name}.{REGION}", "Addr": host, "Port": int(port), "Status": "alive",
                "Tags": {"role": "nomad", "region": REGION, "dc": config.datacenter, "build": NOMAD_VERSION,
                         "herder": self.agent.version, "rpc_addr": host, "port": port, "vsn": "1", "mvn": "1",
                         "raft_vsn": "2", "id": self.node_id, "expect": "1", "bootstrap": "1"},
                "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2, "DelegateMin": 2, "DelegateMax": 5,
                "DelegateCur": 4}

    # -- jobs -------------------------------------------------------------------------

    def allocs_of(self, name: str, request: Request) -> list[AllocRunner]:
        """The allocations of job ``name``; 404 ``job not found`` if there is no such job."""
        if foreign(request):
            raise NomadError(404, "job not found")
        try:
            return self.agent.job(name)
        except NotFound:
            raise NomadError(404, "job not found") from None

    def document(self, name: str, job_id: str | None = None) -> dict[str, Any]:
        """Job ``name`` (its submission ``job_id``, by default the latest) in Nomad's JSON."""
        parent = self.agent.parent(name)
        if parent is not None:
            document = to_nomad(json.loads(parent.source.text))["Job"]
            periodic = document.get("Periodic")
            if isinstance(periodic, dict):  # herder's crons as Nomad's one spec (and a list, as Nomad 1.6+)
                specs = periodic.get("Specs") or [periodic.get("Spec", "")]
                document["Periodic"] = {"Enabled": periodic.get("Enabled", True), "SpecType": "cron",
                                        "Spec": specs[0], "Specs": specs,
                                        "ProhibitOverlap": periodic.get("ProhibitOverlap", False),
                                        "TimeZone": periodic.get("TimeZone") or "UTC"}
            return document
        allocs = self.agent.job(name)
        record = self.agent.job_version(name, job_id or allocs[-1].job_id).record
        if record is None:
            return {"ID": name, "Name": name}
        if record.format == "json":
            submitted = json.loads(record.text)
            if isinstance(submitted, dict) and isinstance(submitted.get("Job"), dict):
                return dict(submitted["Job"])  # sent in Nomad's JSON: given back as it came
        return to_nomad(app.canonical_document(record))["Job"]

    def job_document(self, job: dict[str, Any]) -> dict[str, Any]:
        """A Nomad job with the fields a Nomad server fills in, where the job leaves them out."""
        groups = [{"Count": 1, "Tasks": [], **group} for group in job.get("TaskGroups") or []]
        name = job.get("ID") or job.get("Name") or ""
        return {**JOB_DEFAULTS, "Type": "service", "Datacenters": [self.agent.config.datacenter], "Stop": False,
                "ParentID": "", "Dispatched": False, "Status": "pending", "StatusDescription": "", "Stable": False,
                "Version": 0, "SubmitTime": 0, "CreateIndex": 1, "ModifyIndex": 1, "JobModifyIndex": 1,
                **{k: v for k, v in job.items() if v is not None}, "ID": name, "Name": job.get("Name") or name,
                "TaskGroups": groups}

    def given(self, job: Mapping[str, Any]) -> str:
        """The text of Nomad job ``job`` as the agent takes it: its unset fields left out
        (:func:`~herder.jobspec.nomad_structs.normalized`, :data:`JOB_DEFAULTS`), its fields in Nomad's
        order, so that the same job reads as the same text whoever sent it; the blocks in a task's
        config as its driver reads them (:func:`~herder.jobspec.task_config.merge_blocks`)."""
        kept = {key: value for key, value in normalized(job).items()
                if key not in JOB_DEFAULTS or not _same(value, JOB_DEFAULTS[key])}
        schemas = self.agent.hooks.task_schemas()
        groups = [group for group in kept.get("TaskGroups") or [] if isinstance(group, dict)]
        for task in (task for group in groups for task in group.get("Tasks") or [] if isinstance(task, dict)):
            if isinstance(task.get("Config"), dict):
                task["Config"] = merge_blocks(task["Config"], schemas.get(str(task.get("Driver"))))
        return json.dumps({"Job": kept})

    def validation(self, job: Mapping[str, Any]) -> models.JobValidateResponse:
        """Nomad job ``job`` checked as a registration checks it, the drivers' configs included:
        a job found invalid is an answer naming its problems, as Nomad's."""
        try:
            warnings = self.agent.validate(self.given(job), "json", "nomad-api")
        except JobError as exc:
            return models.JobValidateResponse(DriverConfigValidated=True, ValidationErrors=exc.errors,
                                              Error=multierror(exc.errors))
        return models.JobValidateResponse(DriverConfigValidated=True, Warnings="\n".join(warnings))

    def job(self, name: str, job_id: str | None = None) -> dict[str, Any]:
        """Job ``name`` as ``GET /v1/job/:id`` answers."""
        allocs = self.agent.job(name)
        parent = self.agent.parent(name)
        document = self.job_document(self.document(name, job_id))
        latest = self.agent.job_versions(name)[-1:]
        version = self.agent.job_version(name, job_id) if job_id else latest[0] if latest else None
        index = self.ledger.index()
        document |= {"Status": self.status(name, allocs), "Stop": self.stopped(name, allocs),
                     "Version": version.number if version else 0,
                     "SubmitTime": nanoseconds(version.submitted_at if version else None),
                     "ParentID": allocs[-1].job.parent_id or "" if allocs else "",
                     "Dispatched": bool(allocs and "/dispatch-" in name), "ModifyIndex": index,
                     "JobModifyIndex": self.job_modify_index(name) or 1,
                     "Stable": bool(version and version.stable)}
        if parent is not None:
            document["ParentID"] = ""
        return document

    def job_modify_index(self, name: str) -> int | None:
        """Nomad's ``JobModifyIndex`` of job ``name``: it changes when the job does; None without a job ``name``."""
        try:
            allocs = self.agent.job(name)
        except NotFound:
            return None
        parent = self.agent.parent(name)
        version = parent.source.id if parent is not None else allocs[-1].job_id
        return self.ledger.job_modify_index(name, version, self.stopped(name, allocs))

    def status(self, name: str, allocs: list[AllocRunner]) -> str:
        """Nomad's job status: pending, running or dead."""
        parent = self.agent.parent(name)
        if parent is not None:
            return "dead" if parent.status == "stopped" else "running"
        current = app.job_status(allocs)
        if current == "running":
            return "running" if any(a.status != "pending" for a in allocs) else "pending"
        return "dead"

    def stopped(self, name: str, allocs: list[AllocRunner]) -> bool:
        parent = self.agent.parent(name)
        if parent is not None:
            return parent.status == "stopped"
        latest = [a for a in allocs if a.job_id == allocs[-1].job_id]
        return all(a.stopping or a.status == "stopped" for a in latest)

    def job_stub(self, name: str) -> models.JobListStub | None:
        try:
            allocs = self.agent.job(name)
            document = self.job(name)
        except NotFound:
            return None  # collected meanwhile
        return models.JobListStub(
            ID=name, ParentID=document["ParentID"], Name=document["Name"], Datacenters=document["Datacenters"],
            Type=document["Type"], Priority=document["Priority"], Periodic=bool(document.get("Periodic")),
            ParameterizedJob=bool(document.get("ParameterizedJob")), Stop=document["Stop"],
            Status=self.status(name, allocs), JobSummary=self.summary(name), SubmitTime=document["SubmitTime"],
            ModifyIndex=document["ModifyIndex"], JobModifyIndex=document["ModifyIndex"], CreateIndex=1)

    def summary(self, name: str) -> models.JobSummary:
        allocs = self.agent.job(name)
        groups: dict[str, models.TaskGroupSummary] = {}
        for alloc in allocs:
            group = groups.setdefault(alloc.group.name, models.TaskGroupSummary())
            status = alloc.status
            if status == "pending":
                group.Starting += 1
            elif status == "running":
                group.Running += 1
            elif status == "failed":
                group.Failed += 1
            else:
                group.Complete += 1
        children = models.JobChildrenSummary()
        for child in self.agent.children(name).values():
            state = app.job_status(child)
            if state == "running":
                children.Running += 1
            else:
                children.Dead += 1
        return models.JobSummary(JobID=name, Summary=groups, Children=children, CreateIndex=1,
                                 ModifyIndex=self.ledger.index())

    # -- evaluations and deployments ---------------------------------------------------

    def evaluation(self, found: Evaluation) -> models.Evaluation:
        waiting = found.wait_until is not None and found.wait_until > time.time()
        return models.Evaluation(ID=found.id, Type=found.job_type, TriggeredBy=found.triggered_by, JobID=found.job,
                                 Status="pending" if waiting else "complete",
                                 WaitUntil=rfc3339(found.wait_until) if found.wait_until else models.ZERO_TIME,
                                 JobModifyIndex=found.create_index, DeploymentID=found.deployment,
                                 CreateIndex=found.create_index, ModifyIndex=found.create_index,
                                 SnapshotIndex=found.create_index, CreateTime=found.created,
                                 ModifyTime=found.created,
                                 FailedTGAllocs={u.group: allocation_metric(u, self.agent.config.datacenter)
                                                 for u in found.failed} or None)

    def deployment(self, found: Deployment) -> models.Deployment:
        groups: dict[str, models.DeploymentState] = {}
        for name, group in found.groups.items():
            update = group.update
            groups[name] = models.DeploymentState(
                AutoRevert=update.auto_revert, AutoPromote=update.auto_promote, Promoted=group.promoted,
                ProgressDeadline=int(update.progress_deadline * SECOND),
                RequireProgressBy=rfc3339(group.progress_by or None),
                PlacedCanaries=group.canaries or None, DesiredCanaries=group.desired_canaries,
                DesiredTotal=group.desired_total, PlacedAllocs=len(group.placed),
                HealthyAllocs=group.healthy, UnhealthyAllocs=group.unhealthy)
        create_index, modify_index = self.ledger.deployment_indexes(found)
        return models.Deployment(ID=found.id, JobID=found.job, JobVersion=found.version,
                                 JobModifyIndex=create_index, JobSpecModifyIndex=create_index,
                                 JobCreateIndex=create_index, TaskGroups=groups, Status=found.status,
                                 StatusDescription=found.description, CreateIndex=create_index,
                                 ModifyIndex=modify_index)

    # -- allocations -------------------------------------------------------------------

    def alloc(self, alloc_id: str, request: Request) -> AllocRunner:
        if foreign(request):
            raise NomadError(404, "alloc not found")
        try:
            return self.agent.alloc(alloc_id)
        except NotFound:
            raise NomadError(404, "alloc not found") from None

    def alloc_signature(self, alloc: AllocRunner) -> object:
        """What the allocation's own shapes show can differ only where this differs: the index (every task
        event and every change of the ledger moves it, and the shapes show it) and what changes without an
        event, or before its event is counted: the allocation's and its tasks' states, its deployment's
        health (brought up to date here, first, as it may move the index), the submission it runs (an update in
        place changes it), and a failed one's rescheduling (its replacement, when it is due: read
        from the state database, so only for a failed allocation; what a replacement replaces is stored with
        it, before its first event)."""
        deployment = self.ledger.deployment_of(alloc.alloc.id)
        status = alloc.status
        return (self.ledger.index(), status, alloc.stopping, deployment.revision if deployment else None,
                alloc.job_id, self.agent.rescheduling(alloc) if status == "failed" else None,
                *((runner.status, len(runner.status.events)) for runner in alloc.tasks))

    def job_signature(self, alloc: AllocRunner) -> object:
        """:meth:`alloc_signature`, and the states of the job's other allocations (its status is shown)."""
        try:
            siblings = self.agent.job(alloc.job.name)
        except NotFound:
            siblings = []
        return self.alloc_signature(alloc), *((a.alloc.id, a.status, a.stopping) for a in siblings)

    @kept(alloc_signature)
    def alloc_stub(self, alloc: AllocRunner) -> models.AllocationListStub:
        return models.AllocationListStub(**self._alloc_fields(alloc))

    def alloc_stubs(self, alloc_ids: Iterable[str]) -> list[Encoded]:
        """The stubs of those of ``alloc_ids`` the client still has."""
        return [self.alloc_stub(alloc) for alloc_id in alloc_ids
                if (alloc := self.agent.alloc_by_id(alloc_id)) is not None]

    @kept(job_signature)
    def allocation(self, alloc: AllocRunner) -> models.Allocation:
        fields = self._alloc_fields(alloc)
        deployment = self.ledger.deployment_of(alloc.alloc.id)
        try:
            job = self.job(alloc.job.name, alloc.job_id)
        except NotFound:  # the job was collected meanwhile
            job = self.job_document({"ID": alloc.job.name, "Type": alloc.job.type})
        fields["ClientDescription"] = (MAX_RUN_DURATION_EXCEEDED if alloc.expired
                                       else CLIENT_DESCRIPTION.get(fields["ClientStatus"], ""))
        rescheduling = self.agent.rescheduling(alloc)
        job["TaskGroups"] = [{**group, "ReschedulePolicy": reschedule_policy(alloc.job, str(group.get("Name")))}
                             for group in job.get("TaskGroups") or []]
        return models.Allocation(**fields, Job=job, **resources.allocated(alloc, job),
                                 PreviousAllocation=rescheduling.previous, NextAllocation=rescheduling.next,
                                 DeploymentID=deployment.id if deployment else "",
                                 Metrics=models.AllocationMetric(NodesAvailable={self.agent.config.datacenter: 1}),
                                 AllocModifyIndex=fields["ModifyIndex"])

    def _alloc_fields(self, alloc: AllocRunner) -> dict[str, Any]:
        created = self.ledger.created(alloc)
        deployment = self.ledger.deployment_of(alloc.alloc.id)
        health = None if deployment is None else deployment.healthy.get(alloc.alloc.id)
        index = self.ledger.index()
        states = {runner.name: self.task_state(alloc, runner.name) for runner in alloc.tasks}
        rescheduling = self.agent.rescheduling(alloc)
        return {
            "FollowupEvalID": self.ledger.followup(alloc, rescheduling.due).id if rescheduling.due else "",
            "RescheduleTracker": models.RescheduleTracker(Events=[models.RescheduleEvent(
                RescheduleTime=nanoseconds(event.time), PrevAllocID=event.previous, PrevNodeID=self.node_id,
                Delay=int(event.delay * SECOND)) for event in rescheduling.tracker]) if rescheduling.tracker else None,
            "ID": alloc.alloc.id, "EvalID": self.ledger.eval_of(alloc.alloc.id), "Name": alloc.alloc.name,
            "NodeID": self.node_id, "NodeName": self.agent.config.node_name, "JobID": alloc.job.name,
            "JobType": alloc.job.type, "JobVersion": self.agent.job_version(alloc.job.name, alloc.job_id).number,
            "TaskGroup": alloc.group.name,
            "DesiredStatus": "stop" if alloc.stopping or alloc.status == "stopped" or rescheduling.next else "run",
            "DesiredDescription": "alloc is being stopped" if alloc.stopping else
                                  "alloc was rescheduled because it failed" if rescheduling.next else "",
            "ClientStatus": ALLOC_STATUS.get(alloc.status, alloc.status),
            "TaskStates": states,
            "DeploymentStatus": None if deployment is None else models.AllocDeploymentStatus(
                Healthy=health, ModifyIndex=self.ledger.deployment_indexes(deployment)[1]),
            "CreateIndex": self.ledger.create_index(alloc.alloc.id), "ModifyIndex": index,
            "CreateTime": created, "ModifyTime": max([created, *(event.Time for task in states.values()
                                                                 for event in task.Events)]),
        }

    def task_state(self, alloc: AllocRunner, task: str) -> models.TaskState:
        runner = self.agent.task(alloc, task)
        status = runner.status
        events = [_event(event) for event in list(status.events)]
        restarts = [e.Time for e in events if e.Type == "Restarting"]
        return models.TaskState(State=status.state, Failed=status.failed, Restarts=status.restarts,
                                LastRestart=rfc3339(restarts[-1] / SECOND) if restarts else models.ZERO_TIME,
                                StartedAt=rfc3339(status.started_at), FinishedAt=rfc3339(status.finished_at),
                                Events=events)


def reschedule_policy(job: Job, group_name: str) -> dict[str, Any] | None:
    """The reschedule policy of a group in Nomad's JSON (with the job type's defaults, as a Nomad
    server fills them in); None for a group that is never rescheduled."""
    group = next((g for g in job.groups if g.name == group_name), None)
    policy = group.reschedule if group is not None else None
    if policy is None:
        return None
    return {"Attempts": policy.attempts, "Interval": int(policy.interval * SECOND),
            "Delay": int(policy.delay * SECOND), "DelayFunction": policy.delay_function,
            "MaxDelay": int(policy.max_delay * SECOND), "Unlimited": policy.unlimited}


def _event(event: TaskEvent) -> models.TaskEvent:
    details = {str(k): str(v) for k, v in (event.details or {}).items()}
    exit_code = details.get("exit_code", "0")
    signal = details.get("signal", "0")
    return models.TaskEvent(Type=event.type, Time=int(event.time.timestamp() * SECOND),
                            DisplayMessage=event.message, Message=event.message, Details=details,
                            ExitCode=int(exit_code) if exit_code.lstrip("-").isdigit() else 0,
                            Signal=int(signal) if signal.isdigit() else 0)
