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
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from wattsched.daemon.slurm import hostlist
from wattsched.daemon.slurm.sacct import SACCT_FORMAT

from .conftest import wait_for
from .traces_live import QUERY, RATE_WINDOW, burst, prometheus_job_energy, read_csv, scraped_until, wattsched

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N_JOBS = 12  # the first 12 of test_traces_import_live.py's burst: about a minute of the four nodes


def slurm_times(cluster, start: str) -> dict[int, dict]:
    """Slurm's own record of the jobs since ``start``: sacct printing epoch seconds (``SLURM_TIME_FORMAT=%s``)."""
    env = {**cluster.env, "SLURM_TIME_FORMAT": "%s"}
    out = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-S", start, "-E", "now",
                          "--format=JobIDRaw,Submit,Start,End,NNodes,NodeList,State"],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    found = {}
    for line in out.splitlines():
        job, submit, begin, end, nodes, node_list, state = line.split("|")
        found[int(job)] = {"submit": submit, "start": begin, "end": end, "nodes": nodes, "node_list": node_list,
                           "state": state}
    return found


def test_import_the_clusters_jobs_from_slurm_accounting_and_replay_them_as_run(cluster, accounting, tmp_path):
    t_test = time.monotonic()
    t0 = int(time.time()) - 1
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0))  # sacct -S in local time
    ids, declared = [], {}
    jobs = burst(n=N_JOBS)
    t_first = time.time() + 1
    for offset, nodes, run_s, watts in jobs:
        time.sleep(max(0.0, t_first + offset - time.time()))
        job = cluster.submit(nodes=nodes, seconds=run_s, time_limit_min=1, user="alice",
                             extra=(f"--comment=wattsched:power={watts}",))
        ids.append(job)
        declared[job] = watts
    wait_for(lambda: not any(j in cluster.active() for j in ids), 300, "the burst to finish", interval_s=1)

    def ended():  # slurmdbd has every end (slurmctld sends them as the jobs finish)
        found = slurm_times(cluster, start)
        return found if all(found.get(j, {}).get("end", "Unknown") not in ("", "Unknown") for j in ids) else None

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
                         "--power", "none"], "none")}
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
    ours = {}
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
    print(json.dumps({"jobs": len(ids), "imported_j": imported_total, "replay_j": replay_total,
                      "replay_vs_imported": energy_error, "runtime_s": time.monotonic() - t_test}, indent=2))
