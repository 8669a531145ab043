"""The resize scripts of a shrunk job: taken from where scontrol wrote them, put in the job's working directory.

``scontrol update JobId=<id> NodeList=...`` run with ``SLURM_JOBID=<id>`` writes ``slurm_job_<id>_resize.sh``
and ``.csh`` (the job's new ``SLURM_NODELIST``, ``SLURM_JOB_NUM_NODES``, ...) in its own working directory, for
the job's shell to source (https://slurm.schedmd.com/faq.html#job_size). The daemon runs it in a private
directory and copies the scripts into the job's working directory itself: it runs as root or SlurmUser, and a
directory its user owns may hold a link named like a script, which a plain open would follow. Here an existing
entry is unlinked (a link, not what it points to) and the file created anew, exclusively and without following
links, owned by the job's user and, as scontrol makes them, readable and executable by that user alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger("wattsched.daemon")

__all__ = ["VARIABLES", "collect", "names", "place"]

VARIABLES = ("SLURM_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NNODES", "SLURM_JOB_NUM_NODES",
             "SLURM_JOB_CPUS_PER_NODE", "SLURM_TASKS_PER_NODE")
"""The variables scontrol writes into the resize scripts, each only if it finds it set in its own environment
(``_update_job_size()``, src/scontrol/update_job.c): the daemon sets them all for it."""


def names(job_id: int) -> tuple[str, str]:
    """The two scripts' names, as scontrol gives them (``_update_job_size()``, src/scontrol/update_job.c)."""
    return f"slurm_job_{job_id}_resize.sh", f"slurm_job_{job_id}_resize.csh"


def collect(directory: Path, job_id: int) -> dict[str, bytes]:
    """The scripts scontrol wrote in ``directory``, by name."""
    found = {}
    for name in names(job_id):
        path = directory / name
        if path.is_file():
            found[name] = path.read_bytes()
    return found


def place(scripts: dict[str, bytes], work_dir: str, uid: int, gid: int, job_id: int) -> list[str]:
    """Write ``scripts`` into ``work_dir`` as the job's (``uid``, ``gid``); return the paths written.

    A script that cannot be written (the directory gone or not a directory, no permission, an entry that is a
    directory) is logged and skipped: the shrink itself has been done.
    """
    written = []
    try:
        dfd = os.open(work_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        log.warning("job %s: resize scripts not written: working directory %s: %s", job_id, work_dir,
                    exc.strerror)
        return written
    try:
        for name, data in scripts.items():
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dfd)
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700, dir_fd=dfd)
                with os.fdopen(fd, "wb") as f:
                    if os.geteuid() == 0:
                        os.fchown(f.fileno(), uid, gid)
                    f.write(data)
            except OSError as exc:
                log.warning("job %s: resize script %s not written: %s", job_id, os.path.join(work_dir, name),
                            exc.strerror)
                continue
            written.append(os.path.join(work_dir, name))
    finally:
        os.close(dfd)
    return written
