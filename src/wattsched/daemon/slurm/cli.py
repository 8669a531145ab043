"""The Slurm command-line backend: the one place that runs ``squeue``, ``sinfo``, ``scontrol`` and ``scancel``.

Every command has a time limit; failures to reach slurmctld (and time-outs) are
retried with exponential backoff; anything else Slurm refuses is raised at once
as a :class:`~wattsched.errors.SlurmCommandError` carrying the command, exit
code, stdout and stderr.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wattsched.daemon.slurm import parse, resize
from wattsched.daemon.slurm.backend import WallClock
from wattsched.daemon.slurm.records import ClusterState
from wattsched.errors import SlurmCommandError, WattschedError

log = logging.getLogger(__name__)

TRANSIENT = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
    "Slurm backup controller in standby mode",
    "Communication connection failure",
    "Unable to establish control machine address",
    "timed out",
)
"""Fragments of Slurm error messages worth a retry: slurmctld down, restarting or busy."""


class SlurmCLI(WallClock):
    """Runs Slurm commands.

    Parameters
    ----------
    conf
        slurm.conf, passed as ``SLURM_CONF``; ``None`` leaves Slurm's default.
    bin_dir
        Where the commands are; ``None`` looks them up on ``PATH``.
    output
        ``json``, ``text`` or ``auto`` (JSON, text if the JSON commands fail).
    """

    name = "cli"
    reshape = "shrink"

    def __init__(
        self,
        conf: str | os.PathLike | None = None,
        bin_dir: str | os.PathLike | None = None,
        output: str = "auto",
        timeout_s: float = 30.0,
        retries: int = 2,
        retry_backoff_s: float = 1.0,
        sleep=time.sleep,
    ):
        self.env = dict(os.environ)
        if conf is not None:
            self.env["SLURM_CONF"] = str(conf)
        self.bin_dir = Path(bin_dir) if bin_dir else None
        self.output = output
        self.timeout_s = timeout_s
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self._sleep = sleep
        self.version: tuple[int, int, int] | None = None
        self.commands_run = 0
        self._job_cache: dict = {}  # jobs of the last read, reused where unchanged (parse.decode_squeue_json)

    # ------------------------------------------------------------------ running

    def _argv(self, args: Sequence[str]) -> list[str]:
        cmd = list(args)
        if self.bin_dir is not None:
            cmd[0] = str(self.bin_dir / cmd[0])
        return cmd

    def run(self, args: Sequence[str], *, retry: bool = True, raw: bool = False, cwd: str | None = None,
            env: dict[str, str] | None = None) -> Any:
        """Run one Slurm command and return its stdout; raise :class:`SlurmCommandError` on failure.

        ``raw=True`` returns stdout as the bytes the command wrote (what the JSON
        decoders read without a decoded copy of a 250 MB ``squeue --json``).
        """
        cmd = self._argv(args)
        attempts = 1 + (self.retries if retry else 0)
        delay = self.retry_backoff_s
        for attempt in range(1, attempts + 1):
            self.commands_run += 1
            try:
                proc = subprocess.run(cmd, env=self.env if env is None else env, cwd=cwd, capture_output=True,
                                      timeout=self.timeout_s, check=False)
            except subprocess.TimeoutExpired as exc:
                err = SlurmCommandError(
                    cmd, -1, _text(exc.stdout), f"timed out after {self.timeout_s:g} s. " + _text(exc.stderr)
                )
                transient = True
            except OSError as exc:
                raise SlurmCommandError(cmd, -1, "", f"cannot run {cmd[0]}: {exc.strerror}") from exc
            else:
                if proc.returncode == 0:
                    return proc.stdout if raw else _text(proc.stdout)
                stdout, stderr = _text(proc.stdout), _text(proc.stderr)
                err = SlurmCommandError(cmd, proc.returncode, stdout, stderr)
                transient = any(t in stderr or t in stdout for t in TRANSIENT)
            if not transient or attempt == attempts:
                raise err
            log.warning("%s (attempt %d of %d); retrying in %.1f s", err, attempt, attempts, delay)
            self._sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ reading

    def slurm_version(self) -> tuple[int, int, int]:
        if self.version is None:
            self.version = parse.parse_slurm_version(self.run(["sinfo", "--version"]))
        return self.version

    def read_state(self) -> ClusterState:
        version = self.slurm_version()
        now = time.time()
        if self.output in ("json", "auto"):
            try:
                return self._read_json(version, now)
            except SlurmCommandError as exc:
                if self.output == "json" or _unreachable(exc):
                    raise
                log.warning("JSON output failed (%s); reading plain text", exc)
        return self._read_text(version, now)

    def _read_json(self, version, now) -> ClusterState:
        # Always the full job set: squeue has nothing like slurmrestd's update_time. A record that cannot
        # be read is left out and logged (parse.decode_squeue_json), not the whole cycle.
        jobs = parse.decode_squeue_json(self.run(["squeue", "--all", "--json"], raw=True), source="squeue --json",
                                        cache=self._job_cache)
        if version < (23, 2, 0):
            nodes = parse.decode_nodes_json(self.run(["sinfo", "--json"]), source="sinfo --json")
        else:
            nodes = parse.decode_nodes_json(
                self.run(["scontrol", "show", "nodes", "--json"]), source="scontrol show nodes --json"
            )
        return ClusterState(tuple(jobs.records), tuple(nodes.records), version=".".join(map(str, version)),
                            read_at=now, skipped_records=len(jobs.skipped) + len(nodes.skipped),
                            skipped_jobs=jobs.skipped_ids)

    def _read_text(self, version, now) -> ClusterState:
        # -d: each job's CPUs and memory per node (jobs that share nodes). A record that cannot be read (free
        # text that cannot be told from keys included) is left out and logged, not the whole cycle.
        jobs = parse.decode_scontrol_jobs_text(self.run(["scontrol", "-d", "-o", "show", "jobs"]),
                                               source="scontrol -d -o show jobs")
        nodes = parse.decode_scontrol_nodes_text(self.run(["scontrol", "-o", "show", "nodes"]))
        return ClusterState(tuple(jobs.records), tuple(nodes.records), version=".".join(map(str, version)),
                            read_at=now, skipped_records=len(jobs.skipped) + len(nodes.skipped),
                            skipped_jobs=jobs.skipped_ids)

    # ------------------------------------------------------------------ acting

    def hold(self, job_id: int, admin_comment: str) -> None:
        # marker first: a marker on a job that is not held means nothing, a hold without it
        # would look like someone else's
        self.run(["scontrol", "update", f"jobid={job_id}", f"AdminComment={admin_comment}"])
        self.run(["scontrol", "hold", str(job_id)])

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str, node_count: int | None = None) -> None:
        # NumNodes=k-k, not NumNodes=k: the latter sets only the bottom of a moldable job's range, and Slurm
        # 22.05 then runs a job of ReqNodeList=a on a and another node (NumNodes=1 of --nodes=1-3 ran on 2)
        count = [] if node_count is None else [f"NumNodes={node_count}-{node_count}"]
        self.run(["scontrol", "update", f"jobid={job_id}", *count, f"ReqNodeList={','.join(nodes)}",
                  f"AdminComment={admin_comment}"])
        self.run(["scontrol", "release", str(job_id)])

    def shrink(self, job_id: int, nodes: Sequence[str]) -> None:
        # NodeList= of a running job keeps exactly those nodes (NumNodes=k would keep the first k). scontrol
        # writes slurm_job_<id>_resize.sh/.csh in its working directory when SLURM_JOBID names the job, as in
        # the job's own shell, with a line for each of the variables it finds set (resize.VARIABLES): here in a
        # private directory, from which resize.place copies them into the job's working directory (as the
        # job's owner, never through a link).
        with tempfile.TemporaryDirectory(prefix="wattsched-resize-") as tmp:
            env = {**self.env, **dict.fromkeys(resize.VARIABLES, ""), "SLURM_JOBID": str(job_id)}
            self.run(["scontrol", "update", f"jobid={job_id}", f"NodeList={','.join(nodes)}"], cwd=tmp, env=env)
            scripts = resize.collect(Path(tmp), job_id)
        if not scripts:
            log.warning("job %s shrunk to %s; scontrol wrote no resize scripts", job_id, ",".join(nodes))
            return
        try:
            work_dir, uid, gid = parse.job_work_dir(self.run(["squeue", "--json", f"--jobs={job_id}"]), job_id)
        except WattschedError as exc:
            log.warning("job %s shrunk to %s; its resize scripts were not written: %s", job_id, ",".join(nodes), exc)
            return
        resize.place(scripts, work_dir, uid, gid, job_id)

    def requeue(self, job_id: int) -> None:
        self.run(["scontrol", "requeue", str(job_id)])

    def cancel(self, job_id: int) -> None:
        self.run(["scancel", str(job_id)])

    def power_down(self, node: str) -> None:
        self.run(["scontrol", "update", f"nodename={node}", "state=POWER_DOWN"])

    def power_up(self, node: str) -> None:
        self.run(["scontrol", "update", f"nodename={node}", "state=POWER_UP"])

    def ping(self) -> bool:
        try:
            self.run(["scontrol", "ping"], retry=False)
        except SlurmCommandError:
            return False
        return True


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _unreachable(exc: SlurmCommandError) -> bool:
    return exc.returncode == -1 or any(t in exc.stderr for t in TRANSIENT)
