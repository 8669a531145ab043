"""``wattsched traces import`` from real Slurm accounting on the namespace cluster, power from its real Prometheus.

The cluster gets job accounting for this test (``deploy/testcluster/up --accounting``: slurmdbd on a MariaDB
under the cluster's directory, slurmrestd with JWT). A burst of jobs of 1 to 4 nodes, each declaring a power to
the cluster's power emulator, runs under Slurm's own scheduling (no wattsched daemon). Then, as a user would:

    sacct -a -X --json -S START > acct.json
    wattsched traces import --sacct-json acct.json --prometheus URL --power-query Q -o trace.csv
    wattsched traces import --sacct acct.txt ... / --slurmrestd URL --token-file F ...
    wattsched traces import --sacct-json acct.json --prometheus URL --power-query Q --as-run -o as-run.csv
    wattsched platform fit --trace as-run.csv ... -o site.yaml
    wattsched simulate --trace as-run.csv --platform site.yaml --policy fcfs

Checked: every job of the burst is imported, and only those, with Slurm's own submit, start and end (``sacct``
itself printing epoch seconds, ``SLURM_TIME_FORMAT=%s``), node list and state; the three ways into slurmdbd
(``sacct --json``, ``sacct -P``, slurmrestd) give the same jobs; each job's power comes from Prometheus and its
energy is what Prometheus itself computes over the job's nodes and run; the replay starts every job when Slurm
did and its job energy is the imported within 2 %.

The cluster's accounting includes energy: each slurmd gathers its node's energy through
``acct_gather_energy/ibmaem`` from an emulated AEM meter that the power emulator advances by the power it gives the
node (the same power the node's RAPL counters get, which Prometheus scrapes), and ``PrologFlags=Contain`` gives
every job an extern step on all its nodes, whose energy slurmctld records as the job's (``ConsumedEnergyRaw`` of
``sacct -X``). The same jobs imported with ``--power slurm-energy`` carry exactly sacct's ``ConsumedEnergyRaw``,
and that agrees with Prometheus's energy of the job within what the two samplings allow
(:func:`energy_tolerance_j`).
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from wattsched.daemon.slurm import hostlist
from wattsched.daemon.slurm.sacct import SACCT_FORMAT

from .conftest import wait_for
from .traces_live import (
    IDLE_W,
    QUERY,
    RATE_WINDOW,
    burst,
    prometheus_job_energy,
    read_csv,
    scraped_until,
    submit_burst,
    wattsched,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N_JOBS = 12  # the first 12 of test_traces_import_live.py's burst: about a minute of the four nodes
SCRAPE_S = 2.0  # the cluster's Prometheus scrape interval
RATE_S = 5.0  # RATE_WINDOW
MAX_W = 400.0  # no job of the burst declares as much (burst(): 160 to 390 W)


def energy_tolerance_j(nodes: int, declared_w: float) -> float:
    """How far Slurm's and Prometheus's energy of one job may be apart, in joules.

    Both integrate the same emulated power, so they differ only in when each looks:

    - Prometheus's power at a time t is ``rate()`` over the samples of the last RATE_S, scraped every SCRAPE_S: the
      mean power over an interval of [t - RATE_S, t] that ends up to SCRAPE_S before t, late by up to
      (RATE_S + SCRAPE_S) / 2 = 3.5 s. Its energy over [start, end) is then that of [start - 3.5 s, end - 3.5 s):
      the power the node drew before the job (idle, or another job's) in place of the job's last seconds.
    - Slurm's is the extern step's: slurmstepd reads the meter itself (ibmaem reads the file on each request) when
      the step starts and when it ends, so AcctGatherNodeFreq (1 s, how fresh slurmd's own CurrentWatts is) plays
      no part; the step starts and ends within about a second of the job's start and end, which Slurm records in
      whole seconds: up to 1 s at each end where the two count different power.

    Each of those 5.5 s is worth, per node, at most the difference between the job's power and what the node drew
    before or after it (idle, or another job of the burst), plus 1 J per node for ibmaem's whole joules.
    """
    lag_s = (RATE_S + SCRAPE_S) / 2 + 2 * 1.0
    return nodes * (lag_s * max(declared_w - IDLE_W, MAX_W - declared_w) + 1.0)


def drawn_tolerance_j(nodes: int, declared_w: float) -> float:
    """How far Slurm's energy of a job may be from what the emulator gave its nodes for it (declared power times
    nodes and run time), in joules: the emulator sees the job start and end within its squeue interval (0.5 s)
    plus squeue's own time, and Slurm's extern step starts and ends within Slurm's whole seconds of the recorded
    start and end: up to 1 s at each end, per node, of the job's power against the node's before or after it,
    plus 1 J per node for ibmaem's whole joules."""
    return nodes * (2 * 1.0 * max(declared_w - IDLE_W, MAX_W - declared_w) + 1.0)


def slurm_times(cluster, start: str) -> dict[int, dict]:
    """Slurm's own record of the jobs since ``start``: sacct printing epoch seconds (``SLURM_TIME_FORMAT=%s``)."""
    env = {**cluster.env, "SLURM_TIME_FORMAT": "%s"}
    out = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-S", start, "-E", "now",
                          "--format=JobIDRaw,Submit,Start,End,NNodes,NodeList,State,ConsumedEnergyRaw"],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    found = {}
    for line in out.splitlines():
        job, submit, begin, end, nodes, node_list, state, energy = line.split("|")
        found[int(job)] = {"submit": submit, "start": begin, "end": end, "nodes": nodes, "node_list": node_list,
                           "state": state, "energy": energy}
    return found


def test_import_the_clusters_jobs_from_slurm_accounting_and_replay_them_as_run(cluster, accounting, tmp_path):
    t_test = time.monotonic()
    t0 = int(time.time()) - 1
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0))  # sacct -S in local time
    jobs = burst(n=N_JOBS)
    declared = submit_burst(cluster, jobs, time.time() + 1)
    ids = list(declared)
    assert max(declared.values()) < MAX_W  # energy_tolerance_j's bound on what a node drew around a job
    wait_for(lambda: not any(j in cluster.active() for j in ids), 300, "the burst to finish", interval_s=1)

    def ended():  # slurmdbd has every end and energy (slurmctld sends them as the jobs finish)
        found = slurm_times(cluster, start)
        return found if all(found.get(j, {}).get("end", "Unknown") not in ("", "Unknown")
                            and found[j]["energy"] not in ("", "0") for j in ids) else None

    truth = wait_for(ended, 60, "sacct to record every end", interval_s=1)
    assert sorted(truth) == sorted(ids), "the window holds the burst and nothing else"
    last_end = max(int(t["end"]) for t in truth.values())
    wait_for(lambda: scraped_until(cluster) > last_end + 6, 30, "Prometheus to scrape past the last job")

    # the three ways into slurmdbd, as a user would take them
    acct_json, acct_text, token = tmp_path / "acct.json", tmp_path / "acct.txt", tmp_path / "token"
    acct_json.write_text(cluster.run("sacct", "-a", "-X", "--json", "-S", start, "-E", "now").stdout)
    acct_text.write_text(cluster.run("sacct", "-a", "-X", "-P", "-S", start, "-E", "now",
                                     f"--format={SACCT_FORMAT}").stdout)
    token.write_text(cluster.run("scontrol", "token", "username=root", "lifespan=600").stdout)
    prom = ["--prometheus", cluster.prometheus, "--power-query", QUERY, "--node-label", "node",
            "--rate-window", RATE_WINDOW, "--step", "1"]
    sources = {"json": (["--sacct-json", str(acct_json), *prom], "prometheus"),
               "text": (["--sacct", str(acct_text), "--power", "none"], "none"),
               "rest": (["--slurmrestd", accounting, "--token-file", str(token), "--since", str(t0),
                         "--power", "none"], "none"),
               # power from Slurm's own energy accounting, through sacct --json and sacct -P
               "energy-json": (["--sacct-json", str(acct_json), "--power", "slurm-energy"], "slurm-energy"),
               "energy-text": (["--sacct", str(acct_text), "--power", "slurm-energy"], "slurm-energy")}
    tables = {}
    for name, (args, power) in sources.items():
        out = wattsched("traces", "import", *args, "-q", "-o", str(tmp_path / f"{name}.csv"))
        assert out.returncode == 0, (name, out.stderr)
        assert f"wrote {len(ids)} jobs from" in out.stdout and f"power: {len(ids)} {power}" in out.stdout, \
            (name, out.stdout)
        tables[name] = read_csv(tmp_path / f"{name}.csv")
        assert sorted(tables[name]) == sorted(ids), name
        assert {r["power_source"] for r in tables[name].values()} == {power}, name
    imported = tables["json"]

    # each job as Slurm recorded it, with its power from Prometheus
    ours, gaps, used, drawn_gaps = {}, {}, {}, {}
    for job in ids:
        slurm = truth[job]
        for name, table in tables.items():
            row = table[job]
            origin = float(row["submit_unix_s"]) - float(row["submit_s"])
            assert (float(row["submit_unix_s"]), origin + float(row["start_s"]), origin + float(row["end_s"])) \
                == pytest.approx((int(slurm["submit"]), int(slurm["start"]), int(slurm["end"])), abs=1e-6), \
                (name, job, "Slurm's submit, start and end")
            assert (row["node_list"], row["nodes"], row["state"]) == \
                (slurm["node_list"], slurm["nodes"], slurm["state"]) == (row["node_list"], row["nodes"], "COMPLETED")
            assert row["user"] == "alice", (name, row)
        row = imported[job]
        nodes = list(hostlist.expand(row["node_list"]))
        ours[job] = prometheus_job_energy(cluster, nodes, int(slurm["start"]), int(slurm["end"]))
        assert float(row["energy_j"]) == pytest.approx(ours[job], rel=1e-6), (job, row["energy_j"], ours[job])
        # Slurm's energy of the job: sacct's own ConsumedEnergyRaw, which agrees with Prometheus's
        for name in ("energy-json", "energy-text"):
            row = tables[name][job]
            assert float(row["energy_j"]) == int(slurm["energy"]), (name, job, row["energy_j"], slurm["energy"])
            runtime = int(slurm["end"]) - int(slurm["start"])
            assert float(row["mean_w"]) == pytest.approx(int(slurm["energy"]) / (len(nodes) * runtime)), (name, job)
        slurm_j = int(slurm["energy"])
        allowed = energy_tolerance_j(len(nodes), declared[job])
        assert abs(slurm_j - ours[job]) <= allowed, \
            f"job {job}: Slurm {slurm_j} J, Prometheus {ours[job]:.0f} J, allowed {allowed:.0f} J"
        gaps[job] = (slurm_j - ours[job]) / ours[job]
        drawn = declared[job] * len(nodes) * runtime
        assert abs(slurm_j - drawn) <= drawn_tolerance_j(len(nodes), declared[job]), \
            f"job {job}: Slurm {slurm_j} J, drawn {drawn:.0f} J"
        drawn_gaps[job] = (slurm_j - drawn) / drawn
        used[job] = abs(slurm_j - ours[job]) / allowed

    # the replay with the recorded start times, on a platform fitted to the same telemetry
    as_run, site, nodes_json, run = tmp_path / "as-run.csv", tmp_path / "site.yaml", tmp_path / "nodes.json", \
        tmp_path / "run"
    out = wattsched("traces", "import", "--sacct-json", str(acct_json), *prom, "--as-run", "-q", "-o", str(as_run))
    assert out.returncode == 0, out.stderr
    assert f"wrote {len(ids)} jobs from" in out.stdout and f"power: {len(ids)} prometheus" in out.stdout, out.stdout
    recorded = read_csv(as_run)
    nodes_json.write_text(cluster.run("sinfo", "--json").stdout)
    out = wattsched("platform", "fit", "--trace", str(as_run), "--nodes-json", str(nodes_json), "--name", "wst",
                    *prom, "-o", str(site))
    assert out.returncode == 0, out.stderr
    out = wattsched("simulate", "--trace", str(as_run), "--platform", str(site), "--policy", "fcfs", "--no-report",
                    "-q", "--json", "--out", str(run))
    assert out.returncode == 0, out.stderr
    replayed = read_csv(run / "jobs.csv")
    assert sorted(replayed) == sorted(ids)
    for job in ids:
        origin = float(recorded[job]["submit_unix_s"]) - float(recorded[job]["submit_s"])
        assert origin + float(replayed[job]["start_s"]) == pytest.approx(int(truth[job]["start"]), abs=1e-6), job
        assert origin + float(replayed[job]["end_s"]) == pytest.approx(int(truth[job]["end"]), abs=1e-6), job
        assert float(recorded[job]["energy_j"]) == pytest.approx(float(imported[job]["energy_j"]), rel=1e-9), job
    replay_total = sum(float(r["energy_j"]) for r in replayed.values())
    imported_total = sum(float(r["energy_j"]) for r in imported.values())
    energy_error = replay_total / imported_total - 1.0
    assert abs(energy_error) <= 0.02, f"replay {replay_total:.0f} J, imported {imported_total:.0f} J"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdicts"]["queue"]["drained"] and summary["summary"]["jobs_completed"] == len(ids)
    slurm_total = sum(int(t["energy"]) for t in truth.values())
    print(json.dumps({"jobs": len(ids), "imported_j": imported_total, "replay_j": replay_total,
                      "replay_vs_imported": energy_error, "slurm_energy_j": slurm_total,
                      "slurm_vs_prometheus": slurm_total / imported_total - 1.0,
                      "slurm_vs_prometheus_per_job": {str(j): round(g, 4) for j, g in gaps.items()},
                      "most_of_tolerance_used": max(used.values()),
                      "slurm_vs_drawn_per_job": {str(j): round(g, 4) for j, g in drawn_gaps.items()},
                      "prometheus_vs_drawn": imported_total / sum(declared[j] * int(truth[j]["nodes"])
                                                                  * (int(truth[j]["end"]) - int(truth[j]["start"]))
                                                                  for j in ids) - 1.0,
                      "runtime_s": time.monotonic() - t_test}, indent=2))
