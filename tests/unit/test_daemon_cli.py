"""The daemon's command line (`wattsched daemon|audit|check-config`) and the Slurm command runner.

``daemon`` runs as a real subprocess (it installs signal handlers); the other
commands run in-process through :func:`wattsched.cli.main`. ``SlurmCLI`` runs
small shell scripts standing in for the Slurm commands.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wattsched.cli import main
from wattsched.daemon.slurm.cli import SlurmCLI
from wattsched.daemon.store import AuditEntry, Store
from wattsched.errors import SlurmCommandError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "deploy" / "examples").glob("*.yaml"))
LIVE = ROOT / "tests" / "fixtures" / "slurm" / "v0.0.38-live"


def wattsched(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("NOTIFY_SOCKET", None)
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# --------------------------------------------------------------------------- daemon and audit


def test_daemon_on_the_simulated_cluster_then_audit_lists_its_starts(tmp_path, capsys):
    if port_in_use(9817):  # the embedded sim demo serves /metrics on its default port
        pytest.skip("127.0.0.1:9817 is in use")
    state = tmp_path / "state"
    proc = wattsched("daemon", "--backend", "sim", "--cycles", "3", "--poll-interval", "0.05", "--state-dir",
                     str(state), "--show-metrics")
    assert proc.returncode == 0, proc.stderr
    assert "wattsched_cycles_total 3.0" in proc.stdout.splitlines()
    assert "cycle 3:" in proc.stderr and "stopping: released" in proc.stderr
    assert (state / "state.db").exists() and not (state / "heartbeat").exists()  # removed at stop

    assert main(["audit", "--state-dir", str(state), "--backend", "sim", "--since", "1h"]) == 0
    lines = capsys.readouterr().out.splitlines()
    starts = [line for line in lines if line.split()[3:4] == ["start"]]
    assert starts, lines
    assert all(" applied " in line and " on node" in line for line in starts)
    assert any(line.split()[3] == "started" and " confirmed " in line for line in lines)

    assert main(["audit", "--state-dir", str(state), "--backend", "sim", "--action", "start", "--limit", "1"]) == 0
    only = capsys.readouterr().out.splitlines()
    assert only == [lines[0], *starts[-1:]]
    assert lines[0].split() == ["TIME", "CYCLE", "ACTION", "TARGET", "OUTCOME", "REASON"]


@pytest.mark.parametrize("config", ["embedded-demo", "file-without-telemetry"])
def test_daemon_on_the_simulated_cluster_exports_measured_power(tmp_path, config):
    from prometheus_client.parser import text_string_to_metric_families

    if config == "embedded-demo":
        if port_in_use(9817):  # the embedded demo serves /metrics on the default port
            pytest.skip("127.0.0.1:9817 is in use")
        config = []
    else:  # a file that selects the simulated cluster and says nothing of telemetry (endpoint off)
        path = tmp_path / "sim.yaml"
        path.write_text("slurm: {backend: sim}\npolicy: easy\nmetrics: {port: 0}\n")
        config = ["-c", str(path)]
    proc = wattsched("daemon", *config, "--backend", "sim", "--cycles", "3", "--poll-interval", "0.05",
                     "--state-dir", str(tmp_path / "state"), "--show-metrics")
    assert proc.returncode == 0, proc.stderr
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(proc.stdout) for s in fam.samples}
    measured = samples[("wattsched_platform_power_watts", (("source", "measured"),))]
    predicted = samples[("wattsched_platform_power_watts", (("source", "predicted"),))]
    assert measured > 0 and predicted > 0
    nodes = {labels for name, labels in samples if name == "wattsched_node_power_watts"}
    assert len(nodes) == 100  # every simulated node reports its power
    assert sum(v for (name, _), v in samples.items() if name == "wattsched_node_power_watts") == pytest.approx(
        measured)
    assert samples[("wattsched_telemetry_stale", ())] == 0
    assert "measured on 100 of 100 nodes" in proc.stderr


def test_the_simulated_cluster_reads_reported_power_unless_told_otherwise():
    from wattsched.config.daemon import DaemonConfig, with_sim_telemetry

    assert DaemonConfig.model_validate({"slurm": {"backend": "sim"}}).telemetry.source == "slurm"
    assert DaemonConfig.model_validate({"slurm": {"backend": "sim"}, "telemetry": {"source": "none"}}
                                       ).telemetry.source == "none"
    assert DaemonConfig.model_validate({}).telemetry.source == "none"
    cli = DaemonConfig.model_validate({})
    sim = with_sim_telemetry(cli.model_copy(update={"slurm": cli.slurm.model_copy(update={"backend": "sim"})}))
    assert sim.telemetry.source == "slurm"
    explicit = DaemonConfig.model_validate({"telemetry": {"source": "none"}})
    assert with_sim_telemetry(explicit.model_copy(
        update={"slurm": explicit.slurm.model_copy(update={"backend": "sim"})})).telemetry.source == "none"
    from wattsched.config import load_config

    assert load_config(ROOT / "deploy" / "examples" / "sim.yaml", DaemonConfig).telemetry.source == "slurm"


def test_daemon_refuses_a_busy_metrics_port_with_a_clear_error(tmp_path):
    config = tmp_path / "sim.yaml"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config.write_text(f"slurm: {{backend: sim}}\nsim: {{nodes: 8}}\nstate_dir: state\n"
                          f"metrics: {{port: {port}, address: 127.0.0.1}}\n")
        proc = wattsched("daemon", "-c", str(config), "--cycles", "1")
    assert proc.returncode == 2
    assert f"wattsched: error: metrics: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_daemon_refuses_a_heartbeat_directory_others_can_write(tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    public.chmod(0o777)
    config = tmp_path / "sim.yaml"
    config.write_text(f"slurm: {{backend: sim}}\nsim: {{nodes: 8}}\nstate_dir: state\nmetrics: {{port: 0}}\n"
                      f"heartbeat_file: {public / 'heartbeat'}\n")
    proc = wattsched("daemon", "-c", str(config), "--cycles", "1")
    assert proc.returncode == 2, proc.stderr
    assert f"wattsched: error: {public}: the heartbeat directory (owned by " in proc.stderr
    assert f"has mode 0777, writable by group and others; run: chmod go-w {public}" in proc.stderr
    assert "Traceback" not in proc.stderr and not (public / "heartbeat").exists()


def make_store(state: Path) -> None:
    store = Store(state / "state.db")
    now = time.time()
    store.audit([
        AuditEntry(now - 7200, 1, "start", "10", "on node0001", False, "applied"),
        AuditEntry(now - 60, 2, "hold", "11", "held on arrival", False, "applied"),
        AuditEntry(now - 30, 3, "start", "11", "on node0002", True, "dry-run"),
    ])
    store.close()


def test_audit_since_and_action_filters(tmp_path, capsys):
    make_store(tmp_path)
    assert main(["audit", "--state-dir", str(tmp_path), "--backend", "sim", "--since", "30m"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["TIME", "CYCLE", "ACTION", "TARGET", "OUTCOME", "REASON"]
    assert [line.split()[3:6] for line in lines] == [["hold", "11", "applied"], ["start", "11", "dry-run"]]
    assert lines[1].endswith("[dry-run] on node0002")
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ", line) for line in lines), lines  # local date-times
    assert main(["audit", "--state-dir", str(tmp_path), "--backend", "sim", "--since", "3h", "--action",
                 "start"]) == 0
    assert [line.split()[4] for line in capsys.readouterr().out.splitlines()[1:]] == ["10", "11"]
    assert main(["audit", "--state-dir", str(tmp_path), "--backend", "sim", "--since", "1s"]) == 0
    assert capsys.readouterr().out.startswith("no audit entries since ")


def test_audit_with_a_nonsense_since_is_a_clear_error(tmp_path, capsys):
    make_store(tmp_path)
    assert main(["audit", "--state-dir", str(tmp_path), "--backend", "sim", "--since", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wattsched: error: --since: expected a duration such as 2h or 30m, or a date")
    assert "got 'nonsense'" in err


def test_audit_without_a_state_store_says_so(tmp_path, capsys):
    assert main(["audit", "--state-dir", str(tmp_path / "none"), "--backend", "sim"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'none' / 'state.db'}: no state store" in err
    assert not (tmp_path / "none").exists()  # looking did not create it


# --------------------------------------------------------------------------- check-config


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_check_config_accepts_the_example_configs(path, capsys):
    assert main(["check-config", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: valid daemon config (easy-pc, ")


def test_the_examples_are_all_checked():
    assert {p.name for p in EXAMPLES} >= {"dry-run.yaml", "sim.yaml", "wattsched.yaml"}


def test_check_config_names_file_key_and_line_of_an_unknown_key(tmp_path, capsys):
    path = tmp_path / "wattsched.yaml"
    path.write_text("slurm: {backend: cli}\npolicy: easy\npoll_intervl_s: 5\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: poll_intervl_s: unknown key; did you mean 'poll_interval_s'?" in err


def test_check_config_names_a_nested_unknown_key(tmp_path, capsys):
    path = tmp_path / "wattsched.yaml"
    path.write_text("kind: daemon\npolicy: easy\nslurm:\n  backend: cli\n  tiemout_s: 3\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:5: slurm.tiemout_s: unknown key; did you mean 'timeout_s'?" in err


def test_check_config_rejects_a_bad_node_power_key(tmp_path, capsys):
    path = tmp_path / "wattsched.yaml"
    path.write_text("slurm: {backend: cli}\nnode_power: {idel_w: 1}\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: node_power.idel_w: unknown key; did you mean 'idle_w'?" in err


# --------------------------------------------------------------------------- SlurmCLI.run


def script(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def flaky(tmp_path, failures: int, error: str) -> tuple[Path, Path]:
    """A `squeue` that fails ``failures`` times with ``error``, then prints ``ok``; counts its runs."""
    bin_dir, count = tmp_path / "bin", tmp_path / "count"
    script(bin_dir, "squeue", f"""n=$(cat {count} 2>/dev/null || echo 0)
n=$((n + 1))
echo $n > {count}
if [ $n -le {failures} ]; then
    echo "squeue: error: {error}" >&2
    exit 1
fi
echo ok
""")
    return bin_dir, count


def test_run_retries_an_unreachable_controller_with_backoff(tmp_path):
    bin_dir, count = flaky(tmp_path, 2, "Unable to contact slurm controller (connect failure)")
    delays: list[float] = []
    cli = SlurmCLI(bin_dir=bin_dir, retries=2, retry_backoff_s=0.5, sleep=delays.append)
    assert cli.run(["squeue", "--all"]) == "ok\n"
    assert delays == [0.5, 1.0]
    assert count.read_text().strip() == "3" and cli.commands_run == 3


def test_run_gives_up_after_the_retries(tmp_path):
    bin_dir, count = flaky(tmp_path, 99, "Socket timed out on send/recv operation")
    delays: list[float] = []
    cli = SlurmCLI(bin_dir=bin_dir, retries=3, retry_backoff_s=0.25, sleep=delays.append)
    with pytest.raises(SlurmCommandError, match="Socket timed out") as info:
        cli.run(["squeue"])
    assert delays == [0.25, 0.5, 1.0]
    assert count.read_text().strip() == "4"
    assert info.value.returncode == 1 and info.value.cmd == [str(bin_dir / "squeue")]


def test_run_does_not_retry_what_slurm_refused(tmp_path):
    bin_dir, count = flaky(tmp_path, 99, "Invalid job id specified")
    delays: list[float] = []
    cli = SlurmCLI(bin_dir=bin_dir, retries=2, retry_backoff_s=0.5, sleep=delays.append)
    with pytest.raises(SlurmCommandError, match=r"exited with 1: squeue: error: Invalid job id specified") as info:
        cli.run(["squeue", "--job", "99"])
    assert delays == [] and count.read_text().strip() == "1"
    assert info.value.stderr.strip() == "squeue: error: Invalid job id specified"
    assert info.value.cmd == [str(bin_dir / "squeue"), "--job", "99"]


def test_run_without_retry_runs_once(tmp_path):
    bin_dir, count = flaky(tmp_path, 99, "Unable to contact slurm controller")
    delays: list[float] = []
    with pytest.raises(SlurmCommandError):
        SlurmCLI(bin_dir=bin_dir, retries=2, sleep=delays.append).run(["squeue"], retry=False)
    assert delays == [] and count.read_text().strip() == "1"


def test_run_kills_a_command_past_its_time_limit(tmp_path):
    bin_dir = tmp_path / "bin"
    script(bin_dir, "scontrol", "exec sleep 30\n")
    delays: list[float] = []
    cli = SlurmCLI(bin_dir=bin_dir, timeout_s=0.2, retries=1, retry_backoff_s=0.1, sleep=delays.append)
    t0 = time.monotonic()
    with pytest.raises(SlurmCommandError, match=r"exited with -1: timed out after 0\.2 s") as info:
        cli.run(["scontrol", "ping"])
    assert time.monotonic() - t0 < 5
    assert info.value.returncode == -1
    assert delays == [0.1]  # a time-out is worth one retry


def test_run_of_a_missing_command_is_a_slurm_command_error(tmp_path):
    (tmp_path / "bin").mkdir()
    with pytest.raises(SlurmCommandError, match=r"cannot run .*/bin/sinfo"):
        SlurmCLI(bin_dir=tmp_path / "bin", sleep=lambda s: None).run(["sinfo"])


def test_slurm_conf_is_passed_to_the_commands(tmp_path):
    bin_dir = tmp_path / "bin"
    script(bin_dir, "scontrol", 'echo "conf=$SLURM_CONF"\n')
    out = SlurmCLI(conf=tmp_path / "slurm.conf", bin_dir=bin_dir).run(["scontrol", "show", "config"])
    assert out == f"conf={tmp_path / 'slurm.conf'}\n"


# --------------------------------------------------------------------------- SlurmCLI.read_state on captured output


def fake_slurm(tmp_path, squeue_json_fails: str | None = None) -> Path:
    """Slurm 22.05 commands that print the live capture; ``squeue --json`` may fail with a message."""
    bin_dir = tmp_path / "bin"
    script(bin_dir, "sinfo", f"""case "$1" in
    --version) cat {LIVE / 'version.txt'} ;;
    --json) cat {LIVE / 'sinfo.json'} ;;
    *) echo "sinfo: unexpected $*" >&2; exit 2 ;;
esac
""")
    fail = f'echo "squeue: error: {squeue_json_fails}" >&2; exit 1' if squeue_json_fails else f"cat {LIVE}/squeue.json"
    script(bin_dir, "squeue", f"{fail}\n")
    script(bin_dir, "scontrol", f"""case "$*" in
    "-d -o show jobs") cat {LIVE / 'scontrol_jobs.txt'} ;;
    "-o show nodes") cat {LIVE / 'scontrol_nodes.txt'} ;;
    *) echo "scontrol: unexpected $*" >&2; exit 2 ;;
esac
""")
    return bin_dir


def summary(state):
    return ({j.job_id: (j.state, j.held, j.nodes) for j in state.jobs},
            {n.name: (n.drained, n.powering_down) for n in state.nodes})


def test_read_state_from_22_05_json(tmp_path):
    cli = SlurmCLI(bin_dir=fake_slurm(tmp_path), sleep=lambda s: None)
    state = cli.read_state()
    assert state.version == "22.5.8"
    jobs, nodes = summary(state)
    assert jobs == {1: ("RUNNING", False, ("wsn1", "wsn2")), 2: ("PENDING", True, ()), 3: ("PENDING", True, ()),
                    4: ("PENDING", False, ())}
    assert nodes == {"wsn1": (False, False), "wsn2": (False, False), "wsn3": (True, False), "wsn4": (False, True)}
    assert abs(state.read_at - time.time()) < 60


def test_read_state_falls_back_to_text_when_json_is_refused(tmp_path):
    cli = SlurmCLI(bin_dir=fake_slurm(tmp_path, "JSON plugin not found"), sleep=lambda s: None)
    text = cli.read_state()
    json_state = SlurmCLI(bin_dir=fake_slurm(tmp_path / "j"), sleep=lambda s: None).read_state()
    assert summary(text) == summary(json_state)


def test_read_state_does_not_fall_back_when_slurm_is_unreachable(tmp_path):
    delays: list[float] = []
    cli = SlurmCLI(bin_dir=fake_slurm(tmp_path, "Unable to contact slurm controller"), retries=1,
                   retry_backoff_s=0.1, sleep=delays.append)
    with pytest.raises(SlurmCommandError, match="Unable to contact slurm controller"):
        cli.read_state()
    assert delays == [0.1]


def test_read_state_with_json_only_does_not_fall_back(tmp_path):
    cli = SlurmCLI(bin_dir=fake_slurm(tmp_path, "JSON plugin not found"), output="json", sleep=lambda s: None)
    with pytest.raises(SlurmCommandError, match="JSON plugin not found"):
        cli.read_state()


# --- command line and environment through the config layers -----------------------------------------------------------
def test_a_bad_option_value_names_the_option_not_a_traceback(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("kind: daemon\npolicy: easy\n")
    proc = wattsched("daemon", "-c", str(path), "--poll-interval", "-3")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "wattsched: error: --poll-interval: Input should be greater than 0, got -3.0"


@pytest.mark.parametrize("with_file", [True, False])
def test_the_environment_is_honoured_with_and_without_a_config_file(tmp_path, with_file):
    from argparse import Namespace

    from wattsched.daemon.commands import load_daemon_config

    path = tmp_path / "d.yaml"
    path.write_text("kind: daemon\npolicy: easy\npoll_interval_s: 30\n")
    args = Namespace(config=str(path) if with_file else None, backend=None, dry_run=False, state_dir=None,
                     poll_interval=None)
    env = {"WATTSCHED_POLL_INTERVAL_S": "7", "WATTSCHED_POLICY": "fcfs", "WATTSCHED_DRY_RUN": "true"}
    config, _ = load_daemon_config(args, environ=env)
    assert (config.poll_interval_s, config.policy, config.dry_run) == (7.0, "fcfs", True)
    # the command line wins over the environment
    args.poll_interval = 2.0
    config, _ = load_daemon_config(args, environ=env)
    assert config.poll_interval_s == 2.0
    # and the environment over the embedded demo's defaults
    args.config, args.backend, args.poll_interval = None, "sim", None
    config, _ = load_daemon_config(args, environ=env)
    assert (config.slurm.backend, config.policy, config.poll_interval_s, config.cap_w) == ("sim", "fcfs", 7.0, "60%")


def test_a_bad_environment_value_names_the_variable(tmp_path):
    env_proc = subprocess.run([sys.executable, "-m", "wattsched", "daemon", "--backend", "sim", "--cycles", "1"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "WATTSCHED_POLL_INTERVAL_S": "x"})
    assert env_proc.returncode == 2
    assert "wattsched: error: WATTSCHED_POLL_INTERVAL_S: Input should be a valid number" in (
        env_proc.stderr)


def test_status_shows_the_next_cap_change_and_announced_demand_response(tmp_path, capsys):
    now = int(time.time())
    path = tmp_path / "d.yaml"
    path.write_text(
        "kind: daemon\nslurm: {backend: sim}\nsim: {nodes: 8, speedup: 1}\nmetrics: {port: 0}\n"
        f"state_dir: {tmp_path / 'state'}\npoll_interval_s: 0.05\n"
        f"cap_schedule: [{{start_s: 0, cap_w: 5000}}, {{start_s: {now + 7200}, cap_w: 3000}}]\n"
        f"demand_response: {{events: [{{notice_s: {now - 60}, start_s: {now + 3600}, end_s: {now + 5400}, "
        "cap_w: 2000, label: grid}]}\n")
    proc = wattsched("daemon", "-c", str(path), "--cycles", "1")
    assert proc.returncode == 0, proc.stderr
    assert main(["status", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cap: 5,000 W" in out
    assert "next cap change: " in out and " to 2,000 W" in out  # the event's window comes first
    assert "demand response 'grid': " in out and "cap 2,000 W (announced)" in out


def test_check_config_says_an_openadr2_block_needs_openleadr(tmp_path, capsys, monkeypatch):
    import importlib.util

    path = tmp_path / "wattsched.yaml"
    path.write_text("slurm: {backend: cli}\ndemand_response:\n  openadr2:\n"
                    "    vtn_url: http://127.0.0.1:8080/OpenADR2/Simple/2.0b\n    ven_name: hpc\n"
                    "    vtn_fingerprint: '8E:1B:00'\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openleadr" else real(name, *a))
    assert main(["check-config", str(path)]) == 2
    assert f"{path}:3: demand_response.openadr2: needs openleadr: pip install 'wattsched[openadr]'" in \
        capsys.readouterr().err
