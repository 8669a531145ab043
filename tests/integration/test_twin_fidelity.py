"""Twin fidelity on a real Slurm (deploy/testcluster): how well a replay predicts what the live cluster did.

One seeded workload of 60 jobs (1 to 4 nodes, 1 to 20 s, arriving over about two
minutes, drawing the power the cluster's power emulator gives a busy node) is
submitted twice to the namespace cluster:

- wattsched live: the daemon runs ``easy-pc`` under a cap window, acting, and
  records what it observed (``shadow_record``); ``shadow replay`` then runs the
  same jobs (submit times and run times as they happened, power as measured)
  through the simulator with the same policy and the recorded cap;
- Slurm alone: Slurm's own backfill schedules (the daemon in ``--shadow``
  decides nothing), replayed through the simulator's ``easy``.

Each is replayed three times: as ``shadow replay`` does by default; with one
constant ``--start-latency`` (the time from a decision to Slurm's start) and
``--job-power platform`` (the jobs, seconds long, read low through the
telemetry's 10 s rate window), and, for Slurm alone, ``fcfs`` (Slurm backfills
only every 30 s); and as the second but with Slurm's scheduling passes
(``--sched-passes``, the cluster's ``batch_sched_delay``) instead of the constant
latency, the daemon's release a poll after its decision. Each replay's figures (share of jobs started in the same order,
median and 95th percentile of |live start - replay start| in poll intervals,
energy of the window live against replay) are printed and, with ``WATTSCHED_TWIN_FIGURES=DIR``,
written to ``DIR/<scenario>.json`` (``benchmarks/twin_fidelity.py`` runs this
module and prints them). docs/trust-the-replay.md has the figures measured and
the causes of the differences.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RAPL = 'sum by (node) (rate(node_rapl_package_joules_total{job="node"}[10s]))'
SEED = 33
N_JOBS = 60
# the power emulator's node power (conftest: WS_TC_IDLE_W, WS_TC_BUSY_W), told to the daemon and so to the replay
NODE_POWER = {"idle_w": 100.0, "busy_w": 250.0, "off_w": 10.0}
# at most three busy nodes under the cap (400 W idle + 150 W a busy node; 1,000 W with all four busy)
CAP_W = 880.0
CAP_FROM_S, CAP_UNTIL_S = 20.0, 60.0  # the cap window, from the first submission
# from a submission or a release to Slurm's start: acting, the daemon's poll (1 s) and Slurm's start of a
# released job (up to 3 s, in whole seconds); alone, Slurm's scheduling pass at the submission or end
LIVE_LATENCY_S, SLURM_LATENCY_S = 2.0, 1.0
POLL_S = 1.0  # the daemon's poll_interval_s (conftest's daemon_config)


def batch_sched_delay(cluster) -> float:
    """The cluster's ``batch_sched_delay`` (``SchedulerParameters``; Slurm's default, 3 s, when it is not set)."""
    for line in cluster.run("scontrol", "show", "config").stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "SchedulerParameters":
            for item in value.strip().split(","):
                name, _, number = item.partition("=")
                if name.strip() == "batch_sched_delay":
                    return float(number)
    return 3.0


def workload(seed: int = SEED, n: int = N_JOBS) -> list[tuple[float, int, int]]:
    """``(submit offset s, nodes, run time s)``: Poisson arrivals (mean 2 s apart), mostly small and short jobs
    (about 450 node-seconds in all, so that the 4 nodes queue jobs without the run lasting long).

    >>> jobs = workload()
    >>> len(jobs), {n for _, n, _ in jobs} == {1, 2, 3, 4}, min(r for *_, r in jobs) >= 1, max(r for *_, r in jobs)
    (60, True, True, 20)
    """
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for _ in range(n):
        jobs.append((round(t, 1), rng.choices((1, 2, 3, 4), weights=(50, 28, 14, 8))[0],
                     max(1, min(20, round(20.0 ** (rng.random() ** 1.6))))))
        t += rng.expovariate(1 / 2.0)
    return jobs


def wattsched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=300)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([1.0, 2.0, 3.0, 4.0], 95), percentile([5.0], 95)
    (2.0, 4.0, 5.0)
    """
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def figures(side: dict) -> dict:
    """The fidelity figures of a ``shadow.json``: order, start error in poll intervals, energy live and replayed."""
    queued = [j for j in side["jobs"] if not j["running_at_start"]]
    errors = [abs(j["replay_start_s"] - j["live_start_s"]) for j in queued if j["replay_start_s"] is not None]
    poll = side["start_error_s"]["poll_interval_s"]
    live_e, replay_e = side["live"]["energy_j"], side["replay"]["energy_j"]
    return {
        "jobs": len(queued), "replayed": len(errors), "poll_interval_s": poll,
        "same_order_share": side["start_order"]["same_position_share"],
        "start_error_median_polls": percentile(errors, 50) / poll,
        "start_error_p95_polls": percentile(errors, 95) / poll,
        "start_error_max_s": max(errors),
        "energy_live_j": live_e, "energy_replay_j": replay_e, "energy_error": replay_e / live_e - 1.0,
        "mean_power_error": side["replay"]["mean_power_w"] / side["live"]["mean_power_w"] - 1.0,
        "mean_wait_live_s": side["live"]["mean_wait_s"], "mean_wait_replay_s": side["replay"]["mean_wait_s"],
    }


def run_scenario(cluster, daemon_config, daemon, tmp_path: Path, name: str, *, acting: bool,
                 replays: dict[str, tuple[str, float, str, float | None]]) -> dict:
    """Submit the workload with the daemon acting (``easy-pc`` under the cap) or in shadow mode, then replay it
    with each of ``replays`` (label: policy, start latency in s, job power, Slurm's pass interval or None); the
    figures of each by label."""
    state = tmp_path / f"state-{name}"
    common = {"state_dir": str(state), "node_power": NODE_POWER, "telemetry": {
        "source": "prometheus", "url": cluster.prometheus, "query": RAPL, "node_label": "node", "max_age_s": 30,
        "timeout_s": 5}}
    t0 = time.time() + 15  # the first submission, once the record has begun
    if acting:
        config = daemon_config(policy="easy-pc", shadow_record=True, cap_schedule=[
            {"start_s": t0 + CAP_FROM_S, "end_s": t0 + CAP_UNTIL_S, "cap_w": CAP_W}], **common)
        cluster.fresh_heartbeat()
        d = daemon(config)
    else:
        config = daemon_config(policy="easy", shadow=True, **common)
        d = daemon(config, "--shadow")
    db = state / "state.db"
    wait_for(lambda: len(rows(db, "SELECT id FROM shadow_cycles")) >= 2, 60, "the first recorded cycles")
    ids = []
    for offset, nodes, run_s in workload():
        time.sleep(max(0.0, t0 + offset - time.time()))
        ids.append(cluster.submit(nodes=nodes, seconds=run_s, time_limit_min=1, user="alice"))
    wait_for(lambda: not any(j in cluster.active() for j in ids), 420, "the workload to finish", interval_s=1)
    ended = lambda: {r[0] for r in rows(db, "SELECT job_id FROM shadow_jobs WHERE event='end'")}  # noqa: E731
    wait_for(lambda: set(ids) <= ended(), 30, "every end recorded")
    assert d.alive()
    assert d.stop() == 0
    if acting:  # wattsched started the jobs: every start it applied is in the audit, none a dry run
        applied = {int(r[0]) for r in rows(db, "SELECT target FROM audit WHERE action='start' AND dry_run=0 "
                                                "AND outcome='applied'")}
        assert set(ids) <= applied
    where = os.environ.get("WATTSCHED_TWIN_FIGURES")
    found = {"scenario": name, "replays": {}}
    if acting:
        found["cap_w"], found["cap_window_s"] = CAP_W, [CAP_FROM_S, CAP_UNTIL_S]
    for label, (policy, latency_s, job_power, passes_s) in replays.items():
        out = tmp_path / f"replay-{name}-{label}"
        done = wattsched("shadow", "replay", "-c", str(config), "--since", "1h", "--no-report", "--policy", policy,
                         "--start-latency", str(latency_s), "--job-power", job_power, "--out", str(out),
                         *(() if passes_s is None else ("--sched-passes", str(passes_s))))
        assert done.returncode == 0, done.stderr
        side = json.loads((out / "shadow.json").read_text())
        assert side["policy"] == policy
        assert side["live"]["n_jobs"] == side["replay"]["n_jobs"] == len(ids)
        assert sorted(side["start_order"]["replay"]) == sorted(ids), "the replay starts every job"
        if acting:
            assert side["cap_w"] is not None or side["cap_schedule"], "the replay ran under the recorded cap"
        found["replays"][label] = {"policy": policy, "start_latency_s": latency_s, "job_power": job_power,
                                   "sched_passes_s": passes_s, **figures(side)}
        if where:
            Path(where).mkdir(parents=True, exist_ok=True)
            (Path(where) / f"{name}-{label}-shadow.md").write_text((out / "shadow.md").read_text())
    print(json.dumps(found, indent=2))
    if where:
        (Path(where) / f"{name}.json").write_text(json.dumps(found, indent=2) + "\n")
    return found


def test_easy_pc_live_against_its_replay(cluster, daemon_config, daemon, tmp_path):
    passes_s = batch_sched_delay(cluster)
    f = run_scenario(cluster, daemon_config, daemon, tmp_path, "wattsched-easy-pc", acting=True, replays={
        "as-is": ("easy-pc", 0.0, "measured", None),
        # the daemon's poll and Slurm's start of a released job as one constant; each job's power as the
        # emulator draws it
        "latency": ("easy-pc", LIVE_LATENCY_S, "platform", None),
        # the daemon releases a job at its next poll; Slurm starts it at its next scheduling pass
        "passes": ("easy-pc", POLL_S, "platform", passes_s)})
    plain, modelled = f["replays"]["as-is"], f["replays"]["passes"]
    assert plain["replayed"] == modelled["replayed"] == N_JOBS
    # waiting for Slurm's passes is what makes the replay drift: modelled, the starts follow the live ones
    assert modelled["start_error_median_polls"] < plain["start_error_median_polls"] / 2
    # 1, 1, 5, 1 and 1 polls in five runs (docs/trust-the-replay.md): whether the daemon's release, a poll after the
    # event, catches the pass the event itself asked for depends on the phases of the daemon's poll and of
    # slurmctld's loop within a second, which the record does not hold; the 2-poll target is not asserted
    assert modelled["start_error_median_polls"] <= 6.0
    # live, the mean wait itself moves by more than a tenth between runs (41.3 to 47.2 s): within 20 %, as for Slurm
    assert abs(modelled["mean_wait_replay_s"] / modelled["mean_wait_live_s"] - 1) <= 0.20, "mean wait within 20 %"
    # the share in the same position is not asserted: one job that EASY backfills a few seconds earlier or later
    # in the replay than live moves every later position (docs/trust-the-replay.md)
    # the window's energy is its mean power times its length, and its length follows the starts: a replay that
    # trails the live starts by a few seconds ends later, at the same power (run 6: 243 s against 229 s, mean
    # power -0.1 %, energy +6.0 %); the power is bounded at 5 %, the energy at twice that
    assert abs(modelled["mean_power_error"]) <= 0.05, "mean power of the window within 5 %"
    assert abs(modelled["energy_error"]) <= 0.10, "energy of the window within 10 %"


def test_slurm_backfill_against_the_simulators_easy(cluster, daemon_config, daemon, tmp_path):
    passes_s = batch_sched_delay(cluster)
    f = run_scenario(cluster, daemon_config, daemon, tmp_path, "slurm-backfill", acting=False, replays={
        "easy": ("easy", 0.0, "measured", None),
        # Slurm backfills every bf_interval (30 s); in between, its scheduler at submissions and ends is first come,
        # first served, and on jobs of seconds nearly every start is its
        "fcfs-latency": ("fcfs", SLURM_LATENCY_S, "platform", None),
        # each submission and end asks for a pass of Slurm's main scheduler, at least batch_sched_delay apart
        "fcfs-passes": ("fcfs", 0.0, "platform", passes_s)})
    easy, modelled = f["replays"]["easy"], f["replays"]["fcfs-passes"]
    assert easy["replayed"] == modelled["replayed"] == N_JOBS
    assert modelled["same_order_share"] >= 0.8
    assert modelled["start_error_median_polls"] < easy["start_error_median_polls"] / 2
    # the 2-poll target was met in six runs of seven (1, 2, 2, 1, 1, 3 and 2 polls; 4, 2, 5, 6, 4, 5 and 6 with one
    # constant latency): where slurmctld's loop ticks within Slurm's whole recorded seconds is not in the record
    # (docs/trust-the-replay.md), so the test bounds the median at twice the target
    assert modelled["start_error_median_polls"] <= 4.0, "median start error within 4 poll intervals"
    # -1, -6, -11, -13, -4, -6, -12 % (one constant latency: -14, -11, -22, -26, -18, -18, -25 %): the replay runs
    # ahead, its pass serving a job's end within the same whole second, where slurmctld's loop may come up to a
    # second later (its phase within the second is not in the record)
    assert abs(modelled["mean_wait_replay_s"] / modelled["mean_wait_live_s"] - 1) <= 0.20, "mean wait within 20 %"
    assert abs(modelled["energy_error"]) <= 0.05, "energy of the window within 5 %"
