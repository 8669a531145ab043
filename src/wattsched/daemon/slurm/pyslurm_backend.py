"""The pyslurm backend: Slurm's C API through pyslurm's modern classes, for Slurm 25.11 only.

pyslurm's version follows Slurm's (X.Y = Slurm release) and its build aborts
against any other Slurm; PyPI has 25.11.x but nothing for Debian's 22.05
(REFERENCE-slurm-power.md §2). On other Slurm versions use the ``cli`` backend.

The calls used, as documented in pyslurm 25.11 (``pyslurm/core/job/job.pyx``,
``job/submission.pyx``, ``core/node.pyx``, ``core/error.pyx``):

- ``pyslurm.Jobs.load()`` and ``pyslurm.Nodes.load()``: collections whose
  ``values()`` are :class:`pyslurm.Job` / :class:`pyslurm.Node` objects;
- ``Job(id).modify(JobSubmitDescription(admin_comment=..., required_nodes=...))``
  (the ``slurm_update_job`` RPC), ``Job(id).hold()`` (priority 0, an admin hold),
  ``Job(id).release()`` (priority INFINITE), ``Job(id).requeue()`` and
  ``Job(id).cancel()`` (SIGKILL through ``slurm_kill_job``, as ``scancel`` does);
- ``Node(name).modify(Node(state="POWER_DOWN"))`` and ``"POWER_UP"``;
- failures raise ``pyslurm.RPCError`` (``errno``, ``msg``).

One difference from the CLI backend: pyslurm turns an empty string into "not
set" (``cstr.fmalloc``/``from_list`` leave the field NULL, which
``slurm_update_job`` reads as "unchanged"), so it cannot *clear* a job's
ReqNodeList or AdminComment the way ``scontrol update ... ReqNodeList=`` does.
So:

- a release without nodes (``wattsched release``, ``on_stop: release``) leaves
  a ReqNodeList set earlier in place, and says so in the log;
- releasing a job whose AdminComment would become empty once the marker is
  removed writes :data:`RELEASED` instead, so the marker never outlives the hold.

This module imports without pyslurm; :class:`PyslurmBackend` needs it.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

from wattsched.daemon.slurm import hostlist
from wattsched.daemon.slurm.backend import WallClock
from wattsched.daemon.slurm.parse import (
    _add_id,
    _job_state_from_names,
    _log_skipped,
    _node_state_from_names,
    _reason,
    _shared_text,
)
from wattsched.daemon.slurm.records import ClusterState, SlurmJob, SlurmNode
from wattsched.errors import ConfigError, SlurmCommandError, WattschedError

log = logging.getLogger(__name__)

RELEASED = "wattsched:released"
"""AdminComment written on release when removing the hold marker would leave it empty (see the module docstring)."""

INSTALL_HINT = (
    "pip install 'wattsched[pyslurm]' — pyslurm builds only against Slurm 25.11; on older Slurm use the cli backend "
    "(slurm.backend: cli)"
)


class PyslurmBackend(WallClock):
    """Reads and changes Slurm through pyslurm 25.11.

    Parameters
    ----------
    conf
        slurm.conf to use: set as ``SLURM_CONF`` before pyslurm is imported
        (pyslurm reads the configuration once, at import). ``None`` leaves
        Slurm's default. Has no effect if pyslurm was imported already.
    module
        The pyslurm module; imported if not given (tests pass a fake).

    Raises
    ------
    ConfigError
        When pyslurm cannot be imported, or is an old release without the
        ``Jobs``/``Nodes``/``JobSubmitDescription`` classes.
    """

    name = "pyslurm"
    reshape = "none"

    def __init__(self, conf: str | os.PathLike | None = None, module: ModuleType | None = None):
        if module is None:
            if conf is not None:
                os.environ["SLURM_CONF"] = str(conf)
            try:
                module = importlib.import_module("pyslurm")
            except ImportError as exc:
                raise ConfigError(f"slurm.backend: pyslurm cannot be imported ({exc}). {INSTALL_HINT}") from exc
        missing = [a for a in ("Jobs", "Job", "JobSubmitDescription", "Nodes", "Node", "RPCError")
                   if not hasattr(module, a)]
        if missing:
            version = getattr(module, "__version__", "unknown")
            raise ConfigError(
                f"slurm.backend: pyslurm {version} lacks {', '.join(missing)} (the API of pyslurm 25.11 is needed). "
                + INSTALL_HINT
            )
        self.pyslurm = module
        self.version = ".".join(str(getattr(module, "__version__", "")).split(".")[:2])
        """Slurm's release as pyslurm's version gives it (pyslurm X.Y builds only against Slurm X.Y)."""

    # ------------------------------------------------------------------ errors

    def _call(self, operation: str, args: Iterable[Any], fn):
        """Run one pyslurm call; ``RPCError`` becomes :class:`SlurmCommandError` naming the operation."""
        try:
            return fn()
        except self.pyslurm.RPCError as exc:
            errno = getattr(exc, "errno", None)
            message = getattr(exc, "msg", None) or str(exc)
            raise SlurmCommandError(
                [f"pyslurm.{operation}", *map(str, args)], errno if isinstance(errno, int) else -1, "", str(message)
            ) from exc

    # ------------------------------------------------------------------ reading

    def read_state(self) -> ClusterState:
        now = time.time()
        jobs = self._call("Jobs.load", (), self.pyslurm.Jobs.load)
        nodes = self._call("Nodes.load", (), self.pyslurm.Nodes.load)
        job_list, job_skips, job_ids = _readable(_members(jobs), job_from_pyslurm, "job", "id")
        node_list, node_skips, _ = _readable(_members(nodes), node_from_pyslurm, "node", "name")
        return ClusterState(tuple(job_list), tuple(node_list), version=self.version, read_at=now,
                            skipped_records=job_skips + node_skips, skipped_jobs=job_ids)

    # ------------------------------------------------------------------ acting

    def _job(self, job_id: int):
        return self.pyslurm.Job(int(job_id))

    def hold(self, job_id: int, admin_comment: str) -> None:
        # marker first, as the CLI backend does: a marker on a job that is not held means
        # nothing, a hold without it would look like someone else's
        job = self._job(job_id)
        if admin_comment:
            changes = self.pyslurm.JobSubmitDescription(admin_comment=admin_comment)
            self._call("Job.modify", (job_id, f"admin_comment={admin_comment}"), lambda: job.modify(changes))
        self._call("Job.hold", (job_id,), job.hold)

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str, node_count: int | None = None) -> None:
        job = self._job(job_id)
        comment = admin_comment or RELEASED
        fields: dict[str, Any] = {"admin_comment": comment}
        if node_count is not None:  # "k-k": exactly k, as the CLI backend's NumNodes=k-k
            fields["nodes"] = f"{node_count}-{node_count}"
        if nodes:
            fields["required_nodes"] = ",".join(nodes)
        else:
            self._warn_kept_pin(job_id)
        changes = self.pyslurm.JobSubmitDescription(**fields)
        args = [job_id, *(f"{k}={v}" for k, v in fields.items())]
        self._call("Job.modify", args, lambda: job.modify(changes))
        self._call("Job.release", (job_id,), job.release)

    def shrink(self, job_id: int, nodes: Sequence[str]) -> None:
        raise SlurmCommandError(
            ["pyslurm.Job.modify", str(job_id), f"required_nodes={','.join(nodes)}"], -1, "",
            "the pyslurm backend does not shrink running jobs (untested against a live Slurm, and pyslurm writes "
            "no resize scripts); use slurm.backend: cli for malleable jobs")

    def _warn_kept_pin(self, job_id: int) -> None:
        try:
            current = self.pyslurm.Job.load(int(job_id)).required_nodes
        except self.pyslurm.RPCError:
            return  # the release itself will report the problem
        if current:
            log.warning(
                "job %s keeps ReqNodeList=%s: pyslurm cannot clear it (scontrol update jobid=%s ReqNodeList= can)",
                job_id, current, job_id,
            )

    def requeue(self, job_id: int) -> None:
        job = self._job(job_id)
        self._call("Job.requeue", (job_id,), job.requeue)

    def cancel(self, job_id: int) -> None:
        job = self._job(job_id)
        self._call("Job.cancel", (job_id,), job.cancel)

    def power_down(self, node: str) -> None:
        self._set_node_state(node, "POWER_DOWN")

    def power_up(self, node: str) -> None:
        self._set_node_state(node, "POWER_UP")

    def _set_node_state(self, node: str, state: str) -> None:
        ps = self.pyslurm
        self._call("Node.modify", (node, f"state={state}"), lambda: ps.Node(node).modify(ps.Node(state=state)))


# --------------------------------------------------------------------------- mapping (pure)


def _members(collection) -> list:
    """The objects of a pyslurm collection: a ``MultiClusterMap`` (``values()``), a dict, or a list."""
    values = getattr(collection, "values", None)
    return list(values()) if callable(values) else list(collection)


def _text(value) -> str:
    return "" if value is None else str(value)


def _time(value) -> float | None:
    # pyslurm gives None for 0, NO_VAL and INFINITE (utils/ctime.pyx _raw_time)
    return float(value) if value else None


def _gpus(gres: dict | None) -> int:
    """GPUs in a pyslurm GRES dict (``{"gpu": 2}``, ``{"gpu:a100": 2}``, or ``{"gpu": {"count": ..}}``)."""
    total = 0
    for key, value in (gres or {}).items():
        if key.split(":", 1)[0] != "gpu":
            continue
        count = value.get("count", 0) if isinstance(value, dict) else value
        total += int(count) if str(count).isdigit() else 0
    return total


def _gres_text(gres: dict | None) -> str:
    """A node's configured GRES dict back in slurm.conf form: ``{"gpu:a100": 4}`` -> ``gpu:a100:4``."""
    parts = []
    for key, value in (gres or {}).items():
        count = value.get("count", 0) if isinstance(value, dict) else value
        parts.append(f"{key}:{count}")
    return ",".join(parts)


def _count(value) -> int:
    """A pyslurm count as an int: ``None`` (unset), ``"UNLIMITED"`` and anything not a count give 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _readable(members: Iterable, convert, what: str, ident: str) -> tuple[list, int, frozenset[int]]:
    """The records ``convert`` reads; one it cannot read is left out and logged once with its id, as
    the CLI and REST backends do (parse.decode_squeue_json), not the whole cycle."""
    out, skipped, ids = [], [], set()
    for member in members:
        try:
            out.append(convert(member))
        except (ValueError, TypeError, AttributeError, WattschedError) as exc:
            name = getattr(member, ident, None)
            skipped.append(f"{what} {name!r:.40}: {exc}")
            _add_id(ids, name)
    _log_skipped(skipped, "pyslurm", what)
    return out, len(skipped), frozenset(ids)


def job_from_pyslurm(job) -> SlurmJob:
    """A :class:`SlurmJob` from a ``pyslurm.Job`` (attribute names of ``pyslurm/core/job/job.pyx``).

    ``shared`` comes from ``resource_sharing`` (Slurm's ``job_share_string()``,
    the ``OverSubscribe=`` of ``scontrol``), what the job asks from ``ntasks``,
    ``ntasks_per_node``, ``cpus_per_task``, ``memory_per_node`` and
    ``memory_per_cpu``; an object without them leaves the defaults (not
    shared). ``allocation`` stays empty: pyslurm's only per-node view,
    ``get_resource_layout_per_node()``, is documented as subject to change, so
    a running job that may share counts as holding its nodes whole.
    """
    state, flags = _job_state_from_names([_text(job.state) or "UNKNOWN"])
    limit = job.time_limit  # minutes; None when unlimited or unset
    priority = job.priority  # 0 when held; None for NO_VAL/INFINITE
    requeue = job.is_requeueable
    batch = job.is_batch_job
    constraints = job.constraints or []
    return SlurmJob(
        job_id=int(job.id),
        state=state,
        user=_text(job.user_name),
        account=_text(job.account),
        partition=_text(job.partition),
        qos=_text(job.qos),
        name=_text(job.name),
        # state_reason is the state description when Slurm set one ("ReqNodeNotAvail, UnavailableNodes:n4");
        # keep the code before the comma, as the text parser does
        reason=_reason(_text(job.state_reason).split(",", 1)[0].strip()),
        flags=flags,
        priority=None if priority is None else int(priority),
        submit_time=_time(job.submit_time),
        start_time=_time(job.start_time),
        end_time=_time(job.end_time),
        time_limit_s=None if not limit else float(limit) * 60.0,
        node_count=int(job.num_nodes or 1),
        cpus=int(job.cpus or 0),
        nodes=hostlist.expand(job.allocated_nodes),
        required_nodes=hostlist.expand(job.required_nodes),
        excluded_nodes=hostlist.expand(job.excluded_nodes),
        comment=_text(job.comment),
        admin_comment=_text(job.admin_comment),
        requeue=True if requeue is None else bool(requeue),
        batch=True if batch is None else bool(batch),
        restart_count=int(job.requeue_count or 0),
        gpus_per_node=_gpus(job.gres_per_node),
        features=",".join(constraints) if isinstance(constraints, list) else _text(constraints),
        shared=_shared_text(_text(getattr(job, "resource_sharing", None))),
        tasks=_count(getattr(job, "ntasks", None)),
        tasks_per_node=_count(getattr(job, "ntasks_per_node", None)),
        cpus_per_task=_count(getattr(job, "cpus_per_task", None)) or 1,
        mem_per_node_mb=_count(getattr(job, "memory_per_node", None)),
        mem_per_cpu_mb=_count(getattr(job, "memory_per_cpu", None)),
    )


def node_from_pyslurm(node) -> SlurmNode:
    """A :class:`SlurmNode` from a ``pyslurm.Node`` (``state`` is Slurm's ``IDLE+DRAIN+POWERED_DOWN`` form)."""
    state, flags = _node_state_from_names(_text(node.state).split("+"))
    watts = node.current_watts  # 0 without energy data
    return SlurmNode(
        name=_text(node.name),
        state=state,
        flags=flags,
        cpus=int(node.total_cpus or 0),
        sockets=int(node.sockets or 0),
        cores_per_socket=int(node.cores_per_socket or 0),
        threads_per_core=int(node.threads_per_core or 1),
        real_memory_mb=int(node.real_memory or 0),
        features=tuple(node.available_features or ()),
        partitions=tuple(node.partitions or ()),
        gres=_gres_text(node.configured_gres),
        reason=_text(node.reason),
        current_watts=float(watts) if watts else None,
    )
