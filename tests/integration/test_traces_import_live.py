"""``wattsched traces import`` on a real Slurm (deploy/testcluster) with power from its real Prometheus.

The namespace cluster keeps no accounting by default (``AccountingStorageType=accounting_storage/none``: no
slurmdbd, so ``sacct`` and slurmrestd's ``/slurmdb`` have nothing), so here its jobs come from what a shadow-mode
daemon saw Slurm do (``traces import --shadow-record``: Slurm's own submit, start and end times from
``squeue --json``); test_traces_import_sacct_live.py takes them through slurmdbd (``up --accounting``). A burst of
jobs of 1 to 4 nodes, each declaring a different power to the cluster's power emulator, runs; Prometheus scrapes
the nodes' RAPL counters (node exporter, every 2 s). Then, as a user would:

    wattsched traces import --shadow-record STATE --prometheus URL --power-query Q --as-run -o trace.csv
    wattsched platform fit --trace trace.csv --prometheus URL --power-query Q -o site.yaml
    wattsched simulate --trace trace.csv --platform site.yaml --policy fcfs

Checked: every job of the burst is imported with its power from Prometheus; each job's energy is what
Prometheus itself computes over the job's nodes and run (a subquery of this test's own, averaged by Prometheus);
the replay starts every job when Slurm did and its job energy is the imported within 2 %; the power read is the
power the emulator drew for each job, within what the 2 s scrape and the rate window smear.
"""

from __future__ import annotations

import json
import statistics
import time

import pytest
import yaml

from .conftest import rows, wait_for
from .traces_live import (
    IDLE_GAP_S,
    IDLE_W,
    N_JOBS,
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


def test_import_the_clusters_jobs_with_prometheus_power_and_replay_them_as_run(cluster, daemon_config, daemon,
                                                                                tmp_path):
    t_test = time.monotonic()
    state = tmp_path / "state"
    config = daemon_config(policy="easy", shadow=True, state_dir=str(state))
    db = state / "state.db"
    d = daemon(config, "--shadow")
    wait_for(lambda: len(rows(db, "SELECT id FROM shadow_cycles")) >= 2, 60, "the first recorded cycles")
    declared = {}
    jobs = burst()
    # two waves with the cluster idle in between, so that the window holds idle power past the rate window too
    for wave in (jobs[:N_JOBS // 2], jobs[N_JOBS // 2:]):
        declared.update(submit_burst(cluster, wave, time.time() + 1 - wave[0][0]))
        wait_for(lambda: not any(j in cluster.active() for j in declared), 300, "the wave to finish", interval_s=1)
        time.sleep(IDLE_GAP_S)
    ids = list(declared)
    ended = lambda: {r[0] for r in rows(db, "SELECT job_id FROM shadow_jobs WHERE event='end'")}  # noqa: E731
    wait_for(lambda: set(ids) <= ended(), 30, "every end recorded")
    assert d.stop() == 0
    last_end = max(r[0] for r in rows(db, "SELECT time FROM shadow_jobs WHERE event='end'"))
    # Prometheus has scraped past the last end (and its rate window)
    wait_for(lambda: scraped_until(cluster) > last_end + 6, 30, "Prometheus to scrape past the last job")

    trace = tmp_path / "trace.csv"
    prom = ["--prometheus", cluster.prometheus, "--power-query", QUERY, "--node-label", "node",
            "--rate-window", RATE_WINDOW, "--step", "1"]
    out = wattsched("traces", "import", "--shadow-record", str(state), "--since", "1h", *prom, "--as-run", "-q",
                    "-o", str(trace))
    assert out.returncode == 0, out.stderr
    assert f"wrote {len(ids)} jobs from" in out.stdout and f"power: {len(ids)} prometheus" in out.stdout, out.stdout
    imported = read_csv(trace)
    assert sorted(imported) == sorted(ids)

    # each job: recorded as Slurm ran it, power from Prometheus, energy as Prometheus computes it
    con_rows = rows(db, "SELECT job_id, event, time, node_list FROM shadow_jobs ORDER BY id")
    starts = {j: t for j, e, t, _ in con_rows if e == "start"}
    ends = {j: t for j, e, t, _ in con_rows if e == "end"}
    from wattsched.daemon.slurm import hostlist

    ours, truth, measured_total = {}, {}, 0.0
    for job in ids:
        row = imported[job]
        assert row["power_source"] == "prometheus", (job, row)
        nodes = list(hostlist.expand(row["node_list"]))
        assert len(nodes) == int(row["nodes"])
        origin = float(row["submit_unix_s"]) - float(row["submit_s"])
        start, end = origin + float(row["start_s"]), origin + float(row["end_s"])
        assert start == pytest.approx(starts[job], abs=1e-6) and end == pytest.approx(ends[job], abs=1e-6), \
            "Slurm's start and end, in epoch seconds"
        assert float(row["runtime_s"]) == pytest.approx(end - start)
        ours[job] = prometheus_job_energy(cluster, nodes, starts[job], ends[job])
        energy = float(row["energy_j"])
        assert energy == pytest.approx(ours[job], rel=1e-6), (job, energy, ours[job])
        assert float(row["mean_w"]) == pytest.approx(energy / (len(nodes) * (end - start)), rel=1e-9)
        truth[job] = declared[job] * len(nodes) * (end - start)
        measured_total += energy
    # the emulator drew what each job declared, from a moment after Slurm's start (it polls squeue every 0.5 s)
    # to the same after the end; the rate over 5 s of counters scraped every 2 s lags that by a second or two,
    # so a job of seconds reads low at its start
    truth_total = sum(truth.values())
    read_vs_drawn = measured_total / truth_total - 1.0
    assert -0.25 < read_vs_drawn < 0.02, f"read {measured_total:.0f} J, the emulator drew {truth_total:.0f} J"
    per_job = sorted(ours[j] / truth[j] - 1.0 for j in ids)
    for j in ids:
        print(f"job {j}: {imported[j]['nodes']} nodes, {float(imported[j]['runtime_s']):.0f} s, declared "
              f"{declared[j]} W, read {float(imported[j]['mean_w']):.1f} W a node")
    # each job's power is its own nodes' over its own run: it follows what the job declared (another node's or
    # another time's power would not); 0.86 to 0.92 in three runs, the shortest jobs reading lowest
    r = statistics.correlation([float(declared[j]) for j in ids], [float(imported[j]["mean_w"]) for j in ids])
    assert r > 0.7, f"correlation of the power read with the power drawn: {r:.2f}"

    # a platform from the same telemetry, and the replay with the recorded start times
    site, nodes_json, run = tmp_path / "site.yaml", tmp_path / "nodes.json", tmp_path / "run"
    nodes_json.write_text(cluster.run("sinfo", "--json").stdout)
    out = wattsched("platform", "fit", "--trace", str(trace), "--nodes-json", str(nodes_json), "--name", "wst",
                    *prom, "-o", str(site))
    assert out.returncode == 0, out.stderr
    [group] = yaml.safe_load(site.read_text())["node_groups"]
    assert group["count"] == len(cluster.nodes) and group["cores"] == 2, group
    assert group["power"]["idle_w"] == pytest.approx(IDLE_W, rel=0.05), group
    out = wattsched("simulate", "--trace", str(trace), "--platform", str(site), "--policy", "fcfs", "--no-report",
                    "-q", "--json", "--out", str(run))
    assert out.returncode == 0, out.stderr
    replayed = read_csv(run / "jobs.csv")
    assert sorted(replayed) == sorted(ids)
    for job in ids:
        assert float(replayed[job]["start_s"]) == pytest.approx(float(imported[job]["start_s"]), abs=1e-6), job
        assert float(replayed[job]["end_s"]) == pytest.approx(float(imported[job]["end_s"]), abs=1e-6), job
    replay_total = sum(float(r["energy_j"]) for r in replayed.values())
    imported_total = sum(float(r["energy_j"]) for r in imported.values())
    energy_error = replay_total / imported_total - 1.0
    assert abs(energy_error) <= 0.02, f"replay {replay_total:.0f} J, imported {imported_total:.0f} J"
    assert replay_total == pytest.approx(sum(ours.values()), rel=0.02), "and Prometheus's own figure"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdicts"]["queue"]["drained"] and summary["summary"]["jobs_completed"] == len(ids)
    figures = {"jobs": len(ids), "imported_j": imported_total, "replay_j": replay_total,
               "replay_vs_imported": energy_error, "read_vs_emulator": read_vs_drawn,
               "per_job_read_vs_emulator": [per_job[0], per_job[len(per_job) // 2], per_job[-1]],
               "read_vs_declared_correlation": r, "fitted_power": group["power"],
               "runtime_s": time.monotonic() - t_test}
    print(json.dumps(figures, indent=2))
