"""A fake ``pyslurm`` module: the part of pyslurm 25.11's API that wattsched uses, over an in-memory slurmctld.

No pyslurm builds against this machine's Slurm 22.05 (REFERENCE-slurm-power.md §2),
so :mod:`wattsched.daemon.slurm.pyslurm_backend` is tested against this fake. It
follows PySlurm/pyslurm's sources of the 25.11 line:

- ``core/error.pyx``: ``RPCError(errno=SLURM_ERROR, msg=None)`` with ``errno`` and
  ``msg``; without ``msg`` the message is ``slurm_strerror(errno)``.
- ``xcollections.pyx``: ``Jobs`` (and here ``Nodes``) are ``MultiClusterMap``\\ s,
  ``{cluster: {key: item}}``; iterating yields keys, ``values()`` every item.
- ``core/job/job.pyx``: ``Jobs.load()``, ``Job(job_id)`` (only the id set),
  ``Job.load(job_id)``, read-only attributes (``allocated_nodes`` is ``None`` for a
  pending job; times and ``time_limit`` are ``None`` for 0/NO_VAL/INFINITE;
  ``priority`` 0 stays 0), ``modify(JobSubmitDescription)`` (``slurm_update_job``),
  ``hold(mode=None)`` = ``modify(JobSubmitDescription(priority=0))`` (``mode="user"``
  adds ``ALLOC_SID_USER_HOLD``), ``release()`` = ``modify(priority=INFINITE)``,
  ``requeue(hold=False)``, ``cancel()`` = ``send_signal(9)`` which ignores
  ``ESLURM_ALREADY_DONE``.
- ``core/job/submission.pyx``: ``JobSubmitDescription(**kwargs)`` accepts only its
  declared attributes; on update an attribute that is ``None`` or empty leaves the
  field unchanged (``cstr.fmalloc``/``from_list`` store NULL).
- ``core/node.pyx``: ``Nodes.load()``, ``Node(name=None, **kwargs)``,
  ``Node.load(name)``, ``Node.modify(Node(state=...))``; ``state`` is Slurm's
  ``node_state_string_complete`` (``IDLE+DRAIN+POWERED_DOWN``) and setting it
  accepts only the states of ``_node_state_from_str`` (``ValueError`` otherwise);
  ``current_watts`` is 0 without energy data.

Every RPC-level call is appended to ``CTLD.calls`` as ``(operation, target, detail)``;
``CTLD.fail(operation, errno)`` makes the next such call raise ``RPCError``.
Install with :func:`install` (the ``fake_pyslurm`` fixture of the tests does).
"""

from __future__ import annotations

import sys
from typing import Any

__version__ = "25.11.2"

# slurm.h / slurm_errno.h values
SLURM_ERROR = -1
INFINITE = 0xFFFFFFFF
NO_VAL = 0xFFFFFFFE
SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR = 1800
ESLURM_ACCESS_DENIED = 2002
ESLURM_INVALID_JOB_ID = 2017
ESLURM_INVALID_NODE_NAME = 2018
ESLURM_ALREADY_DONE = 2021
ESLURM_JOB_PENDING = 2024
ESLURM_DISABLED = 2037
ESLURM_BATCH_ONLY = 2039

_ERRTAB = {
    SLURM_ERROR: "Unspecified error",
    SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR: "Unable to contact slurm controller (connect failure)",
    ESLURM_ACCESS_DENIED: "Access/permission denied",
    ESLURM_INVALID_JOB_ID: "Invalid job id specified",
    ESLURM_INVALID_NODE_NAME: "Invalid node name specified",
    ESLURM_ALREADY_DONE: "Job/step already completing or completed",
    ESLURM_JOB_PENDING: "Job is pending execution",
    ESLURM_DISABLED: "Requested operation is presently disabled",
    ESLURM_BATCH_ONLY: "Only batch jobs are accepted or processed",
}

LOCAL_CLUSTER = "linux"


def slurm_strerror(errno: int) -> str:
    return _ERRTAB.get(errno, f"Unknown error {errno}")


class RPCError(Exception):
    """Exception for Slurm RPC errors (``pyslurm.RPCError``)."""

    def __init__(self, errno: int = SLURM_ERROR, msg: str | None = None):
        self.msg = msg
        self.errno = errno
        if not msg:
            self.msg = slurm_strerror(errno)
        super().__init__(self.msg)



# --------------------------------------------------------------------------- the in-memory slurmctld


class FakeSlurmctld:
    """Jobs and nodes as slurmctld holds them, the calls made, and failures to inject."""

    def __init__(self):
        self.jobs: dict[int, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any, Any]] = []
        self._failures: dict[str, list[int]] = {}

    # -- building a cluster
    def add_job(self, job_id: int, **attrs) -> dict[str, Any]:
        """A job record; attributes as ``pyslurm.Job`` names them (unknown names are refused)."""
        unknown = set(attrs) - set(_JOB_DEFAULTS)
        if unknown:
            raise AttributeError(f"pyslurm.Job has no attribute {sorted(unknown)}")
        record = {**_JOB_DEFAULTS, "id": job_id, **attrs}
        self.jobs[job_id] = record
        return record

    def add_node(self, name: str, **attrs) -> dict[str, Any]:
        unknown = set(attrs) - set(_NODE_DEFAULTS)
        if unknown:
            raise AttributeError(f"pyslurm.Node has no attribute {sorted(unknown)}")
        record = {**_NODE_DEFAULTS, "name": name, **attrs}
        self.nodes[name] = record
        return record

    # -- failures
    def fail(self, operation: str, errno: int, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` (e.g. ``"Job.modify"``) raise ``RPCError(errno)``."""
        self._failures.setdefault(operation, []).extend([errno] * times)

    def _rpc(self, operation: str, target: Any = None, detail: Any = None) -> None:
        self.calls.append((operation, target, detail))
        pending = self._failures.get(operation)
        if pending:
            raise RPCError(pending.pop(0))

    def _job(self, job_id: int) -> dict[str, Any]:
        if job_id not in self.jobs:
            raise RPCError(ESLURM_INVALID_JOB_ID)
        return self.jobs[job_id]

    # -- RPCs
    def update_job(self, job_id: int, desc: JobSubmitDescription) -> None:
        changes = desc._changes()
        self._rpc("Job.modify", job_id, changes)
        job = self._job(job_id)
        if "admin_comment" in changes:
            job["admin_comment"] = changes["admin_comment"]
        if "required_nodes" in changes:
            job["required_nodes"] = changes["required_nodes"]
        if "priority" in changes:
            prio = changes["priority"]
            if prio == 0:
                job["priority"] = 0
                job["state_reason"] = "JobHeldUser" if desc._user_hold else "JobHeldAdmin"
            elif prio == INFINITE:
                # slurmctld recomputes the priority and clears the hold reason
                job["priority"] = 1
                job["state_reason"] = "None"
            else:
                job["priority"] = prio

    def requeue(self, job_id: int, hold: bool) -> None:
        self._rpc("Job.requeue", job_id, {"hold": hold})
        job = self._job(job_id)
        if job["state"] == "PENDING":
            raise RPCError(ESLURM_JOB_PENDING)
        if not job["is_batch_job"]:
            raise RPCError(ESLURM_BATCH_ONLY)
        if not job["is_requeueable"]:
            raise RPCError(ESLURM_DISABLED)
        job.update(state="PENDING", allocated_nodes=None, start_time=None,
                   requeue_count=(job["requeue_count"] or 0) + 1, state_reason="BeginTime")
        if hold:
            job.update(priority=0, state_reason="JobHeldUser")

    def signal_job(self, job_id: int, signal: int) -> None:
        self._rpc("Job.send_signal", job_id, {"signal": signal})
        job = self._job(job_id)
        if job["state"] in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"):
            return  # ESLURM_ALREADY_DONE is ignored by send_signal()
        if signal == 9:
            job.update(state="CANCELLED")

    def update_node(self, name: str, changes: dict[str, Any]) -> None:
        self._rpc("Node.modify", name, changes)
        if name not in self.nodes:
            raise RPCError(ESLURM_INVALID_NODE_NAME)
        node = self.nodes[name]
        state = changes.get("state")
        if state:
            base, *flags = node["state"].split("+")
            # the request flag; slurmctld then moves to POWERING_DOWN/POWERED_DOWN or POWERING_UP
            for flag in state.split("+"):
                if flag not in flags:
                    flags.append(flag)
            node["state"] = "+".join([base, *flags])
        for key, value in changes.items():
            if key != "state":
                node[key] = value


CTLD = FakeSlurmctld()


def reset() -> FakeSlurmctld:
    """A fresh, empty slurmctld for the next test."""
    global CTLD
    CTLD = FakeSlurmctld()
    return CTLD


def install(monkeypatch) -> FakeSlurmctld:
    """Put this module in ``sys.modules["pyslurm"]`` (undone by ``monkeypatch``) and return a fresh slurmctld."""
    monkeypatch.setitem(sys.modules, "pyslurm", sys.modules[__name__])
    return reset()


# --------------------------------------------------------------------------- collections


class MultiClusterMap:
    """``pyslurm.xcollections.MultiClusterMap``: ``{cluster: {key: item}}``."""

    def __init__(self, items: dict[Any, Any] | None = None):
        self.data: dict[str, dict[Any, Any]] = {LOCAL_CLUSTER: dict(items or {})}

    def values(self):
        for cluster in self.data.values():
            yield from cluster.values()

    def keys(self):
        for cluster in self.data.values():
            yield from cluster

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return sum(len(c) for c in self.data.values())

    def __getitem__(self, key):
        if key in self.data:
            return self.data[key]
        return self.data[LOCAL_CLUSTER][key]

    def get(self, key, default=None):
        return self.data[LOCAL_CLUSTER].get(key, default)


# --------------------------------------------------------------------------- jobs

_JOB_DEFAULTS: dict[str, Any] = {
    "id": 0,
    "cluster": LOCAL_CLUSTER,
    "name": None,
    "user_name": None,
    "user_id": None,
    "account": None,
    "partition": None,
    "qos": None,
    "state": "PENDING",
    "state_reason": "None",
    "priority": 1,
    "submit_time": None,
    "start_time": None,
    "end_time": None,
    "time_limit": None,  # minutes
    "num_nodes": 1,
    "cpus": 1,
    "allocated_nodes": None,
    "required_nodes": None,
    "excluded_nodes": None,
    "comment": None,
    "admin_comment": None,
    "is_requeueable": True,
    "is_batch_job": True,
    "requeue_count": 0,
    "gres_per_node": {},
    "constraints": [],
    # what the job asks, as pyslurm gives it for a job submitted without options (None: unset)
    "resource_sharing": "OK",  # job_share_string(): OK (default), YES, NO, USER, MCS, TOPO
    "ntasks": 1,
    "ntasks_per_node": None,
    "cpus_per_task": 1,
    "memory_per_node": None,
    "memory_per_cpu": None,
}


class Job:
    """``pyslurm.Job``: read-only attributes; actions are RPCs to the controller."""

    def __init__(self, job_id: int):
        object.__setattr__(self, "_data", {**_JOB_DEFAULTS, "id": job_id, "priority": None, "state": None,
                                           "state_reason": None, "num_nodes": None, "cpus": None})

    @staticmethod
    def load(job_id: int) -> Job:
        CTLD._rpc("Job.load", job_id)
        record = CTLD._job(job_id)
        job = Job(job_id)
        object.__setattr__(job, "_data", dict(record))
        return job

    def __getattr__(self, name):
        data = object.__getattribute__(self, "_data")
        if name in data:
            value = data[name]
            return list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
        raise AttributeError(f"'pyslurm.Job' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'pyslurm.core.job.job.Job' objects is not writable")

    def __repr__(self):
        return f"pyslurm.Job({self.id})"

    def modify(self, changes: JobSubmitDescription) -> None:
        if not isinstance(changes, JobSubmitDescription):
            raise TypeError(f"Argument 'changes' has incorrect type (expected pyslurm.JobSubmitDescription, got "
                            f"{type(changes).__name__})")
        CTLD.update_job(self.id, changes)

    def hold(self, mode: str | None = None) -> None:
        desc = JobSubmitDescription(priority=0)
        if mode and mode.casefold() == "user":
            desc._user_hold = True
        self.modify(desc)

    def release(self) -> None:
        self.modify(JobSubmitDescription(priority=INFINITE))

    def requeue(self, hold: bool = False) -> None:
        CTLD.requeue(self.id, hold)

    def send_signal(self, signal, steps: str = "children", hurry: bool = False) -> None:
        CTLD.signal_job(self.id, 9 if signal in (9, "SIGKILL", "KILL") else signal)

    def cancel(self) -> None:
        self.send_signal(9)


class Jobs(MultiClusterMap):
    """``pyslurm.Jobs``."""

    @staticmethod
    def load(preload_passwd_info: bool = False, frozen: bool = False) -> Jobs:
        CTLD._rpc("Jobs.load")
        jobs = {}
        for job_id, record in CTLD.jobs.items():
            job = Job(job_id)
            object.__setattr__(job, "_data", dict(record))
            jobs[job_id] = job
        return Jobs(jobs)


_SUBMIT_ATTRIBUTES = frozenset(
    {
        "name", "account", "user_id", "group_id", "priority", "site_factor", "wckey", "array", "batch_constraints",
        "begin_time", "clusters", "cluster_constraints", "comment", "admin_comment", "requires_contiguous_nodes",
        "cores_reserved_for_system", "threads_reserved_for_system", "working_directory", "cpu_frequency", "nodes",
        "deadline", "delay_boot_time", "dependencies", "excluded_nodes", "required_nodes", "constraints",
        "kill_on_node_fail", "licenses", "mail_user", "mail_types", "mcs_label", "memory_per_cpu", "memory_per_node",
        "memory_per_gpu", "network", "nice", "log_files_open_mode", "overcommit", "partitions",
        "accounting_gather_frequency", "qos", "requires_node_reboot", "is_requeueable", "reservations", "script",
        "script_args", "environment", "resource_sharing", "distribution", "time_limit", "time_limit_min", "container",
        "cpus_per_task", "cpus_per_gpu", "sockets_per_node", "cores_per_socket", "threads_per_core", "gpus",
        "gpus_per_socket", "gpus_per_task", "gres_per_node", "ntasks", "ntasks_per_node",
    }
)


class JobSubmitDescription:
    """``pyslurm.JobSubmitDescription``: only its declared attributes can be set."""

    def __init__(self, **kwargs):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_user_hold", False)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __setattr__(self, name, value):
        if name == "_user_hold":
            object.__setattr__(self, name, value)
            return
        if name not in _SUBMIT_ATTRIBUTES:
            raise AttributeError(f"'pyslurm.JobSubmitDescription' object has no attribute '{name}'")
        self._values[name] = value

    def __getattr__(self, name):
        if name in _SUBMIT_ATTRIBUTES:
            return object.__getattribute__(self, "_values").get(name)
        raise AttributeError(name)

    def _changes(self) -> dict[str, Any]:
        """What ``_create_job_submit_desc(is_update=True)`` sends: unset and empty values are left out."""
        out = {}
        for key, value in self._values.items():
            if value is None:
                continue
            if isinstance(value, (list, tuple)):
                value = ",".join(value)
            if value == "":
                continue  # fmalloc/from_list store NULL: "unchanged"
            out[key] = value
        return out


# --------------------------------------------------------------------------- nodes

_NODE_DEFAULTS: dict[str, Any] = {
    "name": None,
    "cluster": LOCAL_CLUSTER,
    "state": "IDLE",
    "next_state": None,
    "total_cpus": 0,
    "sockets": 0,
    "cores_per_socket": None,
    "threads_per_core": None,
    "real_memory": None,
    "available_features": [],
    "active_features": [],
    "partitions": [],
    "configured_gres": {},
    "reason": None,
    "current_watts": 0,
    "avg_watts": 0,
}

_SETTABLE_NODE = frozenset({"state", "reason", "comment", "weight", "available_features", "active_features",
                            "configured_gres", "address", "hostname", "extra"})
_NODE_STATES = frozenset({"CANCEL_REBOOT", "DOWN", "DRAIN", "FAIL", "FUTURE", "NORESP", "NO_RESP", "POWER_DOWN",
                          "POWER_DOWN_ASAP", "POWER_DOWN_FORCE", "POWER_UP", "RESUME", "UNDRAIN"})


class Node:
    """``pyslurm.Node``: a loaded node, or (built with keywords) the changes of ``modify()``."""

    def __init__(self, name: str | None = None, **kwargs):
        object.__setattr__(self, "_data", {**_NODE_DEFAULTS, "name": name})
        object.__setattr__(self, "_changes", {})
        for key, value in kwargs.items():
            setattr(self, key, value)

    @staticmethod
    def load(name: str) -> Node:
        CTLD._rpc("Node.load", name)
        if name not in CTLD.nodes:
            raise RPCError(msg=f"Node '{name}' does not exist")
        node = Node(name)
        object.__setattr__(node, "_data", dict(CTLD.nodes[name]))
        return node

    def __getattr__(self, name):
        data = object.__getattribute__(self, "_data")
        if name in data:
            return data[name]
        raise AttributeError(f"'pyslurm.Node' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name not in _SETTABLE_NODE:
            raise AttributeError(f"attribute '{name}' of 'pyslurm.core.node.Node' objects is not writable")
        if name == "state" and value and value.upper() not in _NODE_STATES:
            raise ValueError(f"Invalid Node state: {value}")
        self._data[name] = value
        self._changes[name] = value.upper() if name == "state" else value

    def __repr__(self):
        return f"pyslurm.Node({self.name})"

    def modify(self, changes: Node) -> None:
        if not isinstance(changes, Node):
            raise TypeError(f"Argument 'changes' has incorrect type (expected pyslurm.Node, got "
                            f"{type(changes).__name__})")
        CTLD.update_node(self.name, dict(object.__getattribute__(changes, "_changes")))


class Nodes(MultiClusterMap):
    """``pyslurm.Nodes``."""

    @staticmethod
    def load(preload_passwd_info: bool = False) -> Nodes:
        CTLD._rpc("Nodes.load")
        nodes = {}
        for name, record in CTLD.nodes.items():
            node = Node(name)
            object.__setattr__(node, "_data", dict(record))
            nodes[name] = node
        return Nodes(nodes)
