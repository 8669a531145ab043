"""deploy/examples/dr-local end to end, as docs/operations.md's "Try demand response locally" runs it: the loopback
OpenADR 2.0b VTN (vtn.py, a process of its own) and ``wattsched daemon`` on the simulated cluster (another
process), then ``wattsched audit`` and ``status``. No Slurm, no test cluster."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_vtn import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "examples" / "dr-local"


def env() -> dict:
    e = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    e.pop("NOTIFY_SOCKET", None)
    return e


def wattsched(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=60,
                          env=env(), check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_an_event_from_the_local_vtn_lowers_frequencies_evicts_a_job_and_is_verified_met(tmp_path):
    pytest.importorskip("openleadr", reason="openleadr not installed (pip install 'wattsched[openadr]')")
    # the example as shipped, on free ports and a state directory of the test's own
    vtn_port, metrics_port = free_port(), free_port()
    config = yaml.safe_load((EXAMPLE / "wattsched.yaml").read_text())
    config["demand_response"]["openadr2"]["vtn_url"] = f"http://127.0.0.1:{vtn_port}/OpenADR2/Simple/2.0b"
    config["metrics"]["port"] = metrics_port
    config["state_dir"] = str(tmp_path / "state")
    path = tmp_path / "wattsched.yaml"
    path.write_text(yaml.safe_dump(config))
    shutil.copy(EXAMPLE / "jobs.swf", tmp_path / "jobs.swf")  # the trace, relative to the config file

    with open(tmp_path / "vtn.log", "w") as vtn_log, open(tmp_path / "daemon.log", "w") as daemon_log:
        t0 = time.monotonic()
        vtn = subprocess.Popen([sys.executable, str(EXAMPLE / "vtn.py"), "--port", str(vtn_port), "--send-after", "4",
                                "--start-in", "8"], stdout=vtn_log, stderr=subprocess.STDOUT, env=env())
        daemon = None
        try:
            deadline = time.monotonic() + 20
            while "listening on" not in (tmp_path / "vtn.log").read_text():
                assert vtn.poll() is None and time.monotonic() < deadline, (tmp_path / "vtn.log").read_text()
                time.sleep(0.2)
            daemon = subprocess.Popen([sys.executable, "-m", "wattsched", "daemon", "-c", str(path), "--poll-interval",
                                       "1"], stdout=daemon_log, stderr=subprocess.STDOUT, env=env())
            verified = ""
            deadline = time.monotonic() + 100
            while "dr_verify" not in verified:
                assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "daemon.log").read_text()
                time.sleep(2)
                verified = wattsched("audit", "-c", str(path), "--since", "10m", "--action", "dr_verify")
            elapsed = time.monotonic() - t0
            status = wattsched("status", "-c", str(path))
        finally:
            for proc in (daemon, vtn):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
    assert elapsed < 120, elapsed
    log = (tmp_path / "daemon.log").read_text()
    vtn_out = (tmp_path / "vtn.log").read_text()

    # the event arrived and was taken part in
    audit = wattsched("audit", "-c", str(path), "--since", "10m")
    received = re.search(r" dr_event +openadr2:dr-local-1 received +LOAD_DISPATCH setpoint 1400: limit 1400 W, "
                         r"starts in (-?\d+) s", audit)
    assert received, audit
    assert 3 <= int(received.group(1)) <= 8  # with its notice: the simulated clock keeps to the VTN's
    assert re.search(r" dr_opt +openadr2:dr-local-1 opt_in ", audit)
    assert "ven-1 answered optIn to dr-local-1" in vtn_out
    # frequencies dropped and a job was evicted (requeued), at the event's start
    freqs = re.findall(r" set_freq +proc\d+ +applied +(\d\.\d\d) GHz", audit)
    assert freqs and min(float(f) for f in freqs) < 2.7, audit
    assert re.search(r" requeue +\d+ +applied +evicted by the policy", audit), audit
    # verified against measured power: met
    row = verified.splitlines()[-1]
    assert " met " in row and "within the limit 1400 W" in row, verified
    watts = int(re.search(r"platform power (\d+) W within", row).group(1))
    assert watts <= 1400
    # the VTN received the measured power in reports, above the limit before the event and under it after
    reported = [float(w.replace(",", "")) for w in re.findall(r"report: measured platform power ([\d,]+) W", vtn_out)]
    assert max(reported) > 1400 and reported[-1] <= 1400, reported
    # status reads the daemon's record: the frequencies it keeps, with the table's header
    assert "node settings wattsched keeps:" in status
    assert re.search(r"NODE +KIND +VALUE +STATE +JOB", status)
    # no OpenADR payload in the daemon's log at its default level
    assert "oadrPayload" not in log and "<?xml" not in log
    assert "INFO openleadr" not in log
