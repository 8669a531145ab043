"""The submit gate (deploy/slurm/job_submit.lua) run by a Lua 5.1 interpreter against a stub of Slurm's lua API.

The live tests (tests/integration/test_daemon_live.py) run it inside slurmctld;
these check each rule in milliseconds. Skipped without a ``lua5.1`` (Debian's
package of the Lua that slurm-wlm-basic-plugins links).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

GATE = Path(__file__).resolve().parents[2] / "deploy" / "slurm" / "job_submit.lua"
LUA = shutil.which("lua5.1") or shutil.which("lua")
pytestmark = pytest.mark.skipif(LUA is None, reason="no lua5.1 interpreter (apt-get install lua5.1)")

NO_VAL = 4294967294  # slurm.NO_VAL: the field is not part of the request
INFINITE = 4294967295  # what `scontrol release` sends
JOB_HELD = 2042  # ESLURM_JOB_HELD
USER, ADMIN = 1000, 64030
PENDING, RUNNING = 0, 1

DRIVER = r"""
slurm = {SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294,
         log_info = function() end, log_error = function() end, log_user = function() end}
dofile(arg[1])
local function show(v) if v == nil then return "nil" end return tostring(v) end
for line in io.lines(arg[2]) do
    -- kind|uid|desc.partition|desc.priority|desc.admin_comment|rec.partition|rec.priority|rec.admin_comment|rec.state
    local f = {}
    for x in string.gmatch(line .. "|", "([^|]*)|") do
        if x == "nil" then f[#f + 1] = false else f[#f + 1] = x end
    end
    local function val(x) if x == false then return nil end return x end
    local desc = {partition = val(f[3]), priority = tonumber(val(f[4])), admin_comment = val(f[5]),
                  user_name = "alice"}
    local rc
    if f[1] == "submit" then
        rc = slurm_job_submit(desc, {}, tonumber(f[2]))
    else
        local rec = {job_id = 7, partition = val(f[6]), priority = tonumber(val(f[7])),
                     admin_comment = val(f[8]), job_state = tonumber(val(f[9]))}
        rc = slurm_job_modify(desc, rec, {}, tonumber(f[2]))
    end
    print(rc .. "|" .. show(desc.priority) .. "|" .. show(desc.admin_comment))
end
"""


@pytest.fixture
def gate(tmp_path):
    """Run requests through a copy of the gate beside its conf; returns ``run(rows, fresh=True)``."""
    shutil.copy(GATE, tmp_path / "job_submit.lua")
    heartbeat = tmp_path / "heartbeat"
    (tmp_path / "wattsched-gate.conf").write_text(
        f"heartbeat_file = {heartbeat}\nmax_age_s = 60\npartitions = batch\nadmin_uids = {ADMIN}\n")
    (tmp_path / "driver.lua").write_text(DRIVER)

    def run(rows: list[tuple], fresh: bool = True) -> list[tuple[int, str, str]]:
        heartbeat.write_text(f"{int(time.time()) - (0 if fresh else 3600)}\n")
        requests = tmp_path / "requests"
        requests.write_text("".join("|".join("nil" if v is None else str(v) for v in row) + "\n" for row in rows))
        proc = subprocess.run([LUA, str(tmp_path / "driver.lua"), str(tmp_path / "job_submit.lua"), str(requests)],
                              capture_output=True, text=True, timeout=30, check=True)
        out = []
        for line in proc.stdout.splitlines():
            rc, prio, comment = line.split("|")
            out.append((int(float(rc)), prio, comment))
        return out

    return run


def submit(partition, priority=None, comment=None, uid=USER):
    return ("submit", uid, partition, priority, comment, None, None, None, None)


def modify(uid, *, partition=None, priority=None, rec_partition="batch", rec_priority=0, rec_comment=None,
           state=PENDING):
    return ("modify", uid, partition, priority, None, rec_partition, rec_priority, rec_comment, state)


def test_every_new_job_of_a_managed_partition_is_held_and_marked_even_if_submitted_held(gate):
    assert gate([submit("batch"), submit("batch", priority=0), submit("batch", comment="site"),
                 submit("other"), submit("other,batch", priority=0)]) == [
        (0, "0", "wattsched:held"),
        (0, "0", "wattsched:held"),  # sbatch --hold: gated too
        (0, "0", "site wattsched:held"),
        (0, "nil", "nil"),  # not managed
        (0, "0", "wattsched:held"),  # one of its partitions is managed
    ]


def test_a_stale_heartbeat_holds_nothing_new(gate):
    assert gate([submit("batch"), submit("batch", priority=0)], fresh=False) == [(0, "nil", "nil"), (0, "0", "nil")]


def test_only_root_and_admin_uids_release_a_marked_job_fresh_or_stale(gate):
    marked = {"rec_comment": "wattsched:held"}
    for fresh in (True, False):
        assert gate([modify(USER, priority=INFINITE, **marked), modify(0, priority=INFINITE, **marked),
                     modify(ADMIN, priority=INFINITE, **marked)], fresh=fresh) == [
            (JOB_HELD, str(INFINITE), "nil"), (0, str(INFINITE), "nil"), (0, str(INFINITE), "nil")]


def test_a_users_release_of_any_held_job_of_a_managed_partition_is_refused_while_fresh(gate):
    unmarked = modify(USER, priority=INFINITE)  # e.g. moved in, held without the marker
    assert gate([unmarked]) == [(JOB_HELD, str(INFINITE), "nil")]
    assert gate([unmarked], fresh=False) == [(0, str(INFINITE), "nil")]  # fail-open
    # other partitions, other updates, and running jobs are not the gate's business
    assert gate([modify(USER, priority=INFINITE, rec_partition="other"),
                 modify(USER, rec_comment="wattsched:held"),
                 modify(USER, priority=INFINITE, rec_priority=5, state=RUNNING)]) == [
        (0, str(INFINITE), "nil"), (0, "nil", "nil"), (0, str(INFINITE), "nil")]


def test_a_job_moved_into_a_managed_partition_is_held(gate):
    into = {"partition": "batch", "rec_partition": "other", "rec_priority": 0}
    assert gate([
        modify(USER, **into),
        modify(USER, priority=INFINITE, **into),  # a release in the same update is dropped
        modify(USER, partition="batch", rec_partition="other", rec_priority=7),  # not held before
        modify(0, **into),  # an administrator's move gets the marker at once
        modify(USER, partition="other", rec_partition="batch", rec_priority=7),  # out of it: nothing to do
    ]) == [
        (0, "0", "nil"),  # no marker: Slurm 22.05 refuses an AdminComment on a user's update
        (0, "0", "nil"),
        (0, "0", "nil"),
        (0, "0", "wattsched:held"),
        (0, "nil", "nil"),
    ]
    assert gate([modify(USER, **into)], fresh=False) == [(0, "nil", "nil")]
