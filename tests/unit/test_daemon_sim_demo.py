"""The daemon's simulated cluster as a demo: its speed, its clock against the wall clock, and ``status`` and
``audit`` reading what the running daemon wrote."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from wattsched.cli import main
from wattsched.config import load_config
from wattsched.config.daemon import DaemonConfig, sim_speed
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
VTN = "demand_response: {openadr2: {vtn_url: 'http://127.0.0.1:1/OpenADR2/Simple/2.0b', ven_name: hpc, " \
      "allow_unsigned_events: true}}\n"


def config_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(f"slurm: {{backend: sim}}\nsim: {{nodes: 16}}\nmetrics: {{port: 0}}\ncap_w: '70%'\n"
                    f"policy: easy-pc\nstate_dir: {tmp_path / 'state'}\npoll_interval_s: 0.2\n{extra}")
    return path


def wattsched(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("NOTIFY_SOCKET", None)
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


# --------------------------------------------------------------------------- speed


def test_speed_is_600_without_a_vtn_and_1_with_one(tmp_path):
    assert sim_speed(load_config(config_file(tmp_path), DaemonConfig)) == 600
    assert sim_speed(load_config(config_file(tmp_path, VTN), DaemonConfig)) == 1
    path = config_file(tmp_path)
    path.write_text(path.read_text().replace("sim: {nodes: 16}\n", "sim: {nodes: 16, speedup: 60}\n"))
    assert sim_speed(load_config(path, DaemonConfig)) == 60


def test_a_speed_other_than_1_with_a_vtn_is_refused_naming_the_key_or_option(tmp_path, capsys):
    path = config_file(tmp_path, VTN)
    path.write_text(path.read_text().replace("sim: {nodes: 16}", "sim: {nodes: 16, speedup: 600}"))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:2: sim\.speedup: 600 with "
                       r"demand_response\.openadr2: a VTN's events are in wall-clock time.*use --speed 1"):
        sim_speed(load_config(path, DaemonConfig))
    assert main(["daemon", "-c", str(config_file(tmp_path, VTN)), "--speed", "600", "--cycles", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wattsched: error: --speed: 600 with demand_response.openadr2: a VTN's events are in "
                          "wall-clock time"), err
    cli = tmp_path / "cli.yaml"
    cli.write_text(f"slurm: {{backend: cli}}\nstate_dir: {tmp_path / 'cli'}\n")
    assert main(["daemon", "-c", str(cli), "--speed", "2", "--cycles", "1"]) == 2
    assert "--speed: the speed of the simulated cluster; the backend is 'cli' (add --backend sim)" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["daemon", "--backend", "sim", "--speed", "0"])
    assert exit_.value.code == 2
    assert "--speed: expected a speed > 0, got 0" in capsys.readouterr().err


def test_the_simulated_cluster_runs_at_the_speed_asked(tmp_path):
    from wattsched.daemon.commands import make_backend

    cfg = load_config(config_file(tmp_path), DaemonConfig)
    fast = make_backend(cfg.model_copy(update={"sim": cfg.sim.model_copy(update={"speedup": 600.0})}))
    real = make_backend(cfg.model_copy(update={"sim": cfg.sim.model_copy(update={"speedup": 1.0})}))
    time.sleep(0.5)
    ahead_fast = fast.read_state().read_at - time.time()
    ahead_real = real.read_state().read_at - time.time()
    assert 200 < ahead_fast < 600, ahead_fast  # about 0.5 s x 600 ahead
    assert abs(ahead_real) < 0.2, ahead_real  # keeps to the wall clock


# --------------------------------------------------------------------------- timestamps in wall-clock time


def test_timestamps_exported_at_speed_600_are_wall_clock_times(tmp_path):
    """``time() - wattsched_last_cycle_timestamp_seconds`` (the dashboard's "Since last good cycle") is never
    negative, and a deadline is exported when it falls on the wall clock."""
    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.notify import Notifier
    from wattsched.daemon.simcluster import SimCluster

    now = time.time()
    cfg = DaemonConfig(state_dir=tmp_path / "state", slurm={"backend": "sim"}, sim={"nodes": 16}, metrics={"port": 0},
                       policy="dr", actuator={"kind": "sim"}, telemetry={"source": "slurm"},
                       demand_response={"deadline_s": 600, "events": [
                           {"label": "peak", "notice_s": now, "start_s": now + 300, "end_s": now + 360000,
                            "cap_w": 1500}]})
    sim = SimCluster.from_config(cfg.sim, speed=600.0)
    d = Daemon(cfg, sim, metrics=DaemonMetrics(CollectorRegistry()), notifier=Notifier(environ={}))
    reg = d.metrics.registry
    time.sleep(1.0)  # 600 simulated seconds: the event is in force
    d.cycle()
    wall = time.time()
    last = reg.get_sample_value("wattsched_last_cycle_timestamp_seconds")
    assert wall - 2 < last <= wall, (last, wall)
    assert d.last_view.snapshot.platform  # the cycle saw the cluster
    assert sim.read_state().read_at - wall > 400  # while the cluster's own clock is 600 s ahead
    assert reg.get_sample_value("wattsched_dr_event_active") == 1
    deadline = reg.get_sample_value("wattsched_dr_event_deadline_timestamp_seconds")
    # start + deadline_s = now + 900 on the cluster's clock, which reads epoch_s at epoch_s and runs 600x:
    # about now + 1.5 s on the wall clock (exactly so, counted from the cluster's epoch)
    assert deadline == pytest.approx(sim.epoch_s + (now + 900 - sim.epoch_s) / 600, abs=1e-3)
    assert deadline == pytest.approx(now + 1.5, abs=1.0)
    d.store.close()


# --------------------------------------------------------------------------- status and audit


def test_status_of_the_simulated_cluster_reads_what_the_daemon_wrote(tmp_path, capsys):
    path = config_file(tmp_path)
    path.write_text(path.read_text().replace("cap_w: '70%'", "cap_w: '30%'"))
    assert main(["status", "-c", str(path)]) == 2  # no store yet
    assert "no state store" in capsys.readouterr().err
    proc = wattsched("daemon", "-c", str(path), "--speed", "600", "--cycles", "8", "--show-metrics")
    assert proc.returncode == 0, proc.stderr
    assert "simulated cluster at 600 simulated seconds per real second (--speed)" in proc.stderr
    metrics = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    running = int(float(metrics['wattsched_jobs{state="running"}']))
    assert running > 0

    assert main(["status", "-c", str(path), "--limit", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "policy easy-pc, active, cycle 8, simulated cluster at 600x"
    assert out[1].startswith("as of the daemon's last cycle, ") and "simulated time 20" in out[1]
    jobs = next(line for line in out if line.startswith("jobs: "))
    # the daemon's own counts (a fresh simulated cluster would start from an empty machine)
    assert jobs.startswith(f"jobs: {running} running, ")
    assert re.search(r"measured power [\d,]+ W \(predicted [\d,]+ W\) on 16 nodes", "\n".join(out))
    held = int(re.search(r"(\d+) held by wattsched", jobs).group(1))
    assert held >= 1  # a 30 % cap on 16 nodes: jobs wait
    i = out.index("held by wattsched:")
    assert out[i + 1].split() == ["JOB", "USER", "NODES", "REASON"]
    assert re.match(r"\s+\d+\s+\S+\s+\d+\s+\S", out[i + 2])
    assert out[i + 3:] == ([f"  ... and {held - 1} more"] if held > 1 else [])

    # a store from another backend's run without a status record: said plainly
    from wattsched.daemon.store import Store

    other = tmp_path / "other"
    Store(other / "state.db").close()
    assert main(["status", "--backend", "sim", "--state-dir", str(other)]) == 2
    assert "no cycle recorded yet: the simulated cluster lives in the daemon process" in capsys.readouterr().err


def test_the_dr_local_example_is_valid_and_its_trace_is_read_next_to_it(tmp_path, capsys, monkeypatch):
    example = ROOT / "deploy" / "examples" / "dr-local" / "wattsched.yaml"
    monkeypatch.chdir(tmp_path)  # not from the repository's root
    assert main(["check-config", str(example)]) == 0, capsys.readouterr().err
    cfg = load_config(example, DaemonConfig)
    assert cfg.sim.trace == str(example.parent / "jobs.swf")
    assert sim_speed(cfg) == 1  # a VTN: the wall clock's pace
    bundled = config_file(tmp_path)
    assert load_config(bundled, DaemonConfig).sim.trace == "bundled"
