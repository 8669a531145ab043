"""`wattsched traces import` on the compose cluster's real slurmdbd: sacct --json, sacct -P and slurmrestd agree."""

from __future__ import annotations

import time
from datetime import timezone

import pytest

from wattsched.daemon.slurm.sacct import SACCT_FORMAT, parse_sacct_json, parse_sacct_text
from wattsched.daemon.traceimport import fetch_slurmdb_jobs, import_accounting

from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_accounting_of_submitted_jobs_from_slurmdbd(docker_cluster):
    c = docker_cluster
    since = time.time() - 5
    two = c.ctl("sbatch", "--parsable", "-N2", "-t", "3", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 3")
    one = c.ctl("sbatch", "--parsable", "-N1", "-t", "7", "-o", "/dev/null", "--wrap", "sleep 1; exit 2")
    ids = {int(two.strip()): (2, 180.0, "COMPLETED"), int(one.strip()): (1, 420.0, "FAILED")}
    wait_for(lambda: not set(ids) & set(c.active()), 120, "the jobs to finish")

    def recorded():
        jobs, _ = parse_sacct_json(c.ctl("sacct", "-a", "-X", "--json", "-S", "now-10minutes"))
        by_id = {j.job_id: j for j in jobs}
        return by_id if all(i in by_id and by_id[i].end for i in ids) else None

    by_json = wait_for(recorded, 60, "slurmdbd to record both jobs")
    text = c.ctl("sacct", "-a", "-X", "-P", "-S", "now-10minutes", f"--format={SACCT_FORMAT}")
    by_text = {j.job_id: j for j in parse_sacct_text(text, tz=timezone.utc)}  # the containers run in UTC
    token = c.token_file.read_text().strip()
    rest, version = fetch_slurmdb_jobs(c.rest_url, token, since=since - 600, until=time.time() + 5)
    by_rest = {j.job_id: j for j in rest}
    for job_id, (nodes, limit, state) in ids.items():
        for source in (by_json, by_text, by_rest):
            job = source[job_id]
            assert (job.nodes, job.time_limit_s, job.state) == (nodes, limit, state), (version, job)
            assert job.submit <= job.start < job.end
        assert by_json[job_id] == by_text[job_id] == by_rest[job_id]
    assert by_json[int(two.strip())].node_names == ("c1", "c2")
    imported = import_accounting([by_json[i] for i in ids], power="auto")
    assert sorted(j.nodes for j in imported.jobs) == [1, 2]
    assert imported.sources == {"none": 2}
