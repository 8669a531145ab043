"""Borghesi et al. 2018 runs through the CLI as a user types them: response scenarios, Eq. 3, node caps."""

from __future__ import annotations

import csv
import json
from importlib.resources import files

import numpy as np
import pytest

from wattsched.cli import main
from wattsched.sim.report import load_run

KTH = files("wattsched.data.traces") / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"


@pytest.mark.slow
def test_dynshare_mixed_on_a_kth_slice_reports_node_caps_over_time(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", "--trace", str(KTH), "--policy", "dynshare", "--param", "response=mixed",
                 "--cap", "60%", "--time-limit", "86400", "--out", str(out), "-q", "--seed", "2"]) == 0
    printed = capsys.readouterr().out
    assert "borghesi2018" in printed and "5.00 min" in printed  # Eq. 3 at 300 s, said in the table
    run, summary = load_run(out)
    assert summary["bsld_definition"] == "borghesi2018" and summary["bsld_threshold_s"] == 300.0
    assert run.info["response"] == "mixed"
    # jobs were slowed by the node caps: some ran longer than their nominal work
    done = run.jobs["state"] == "COMPLETED"
    slow = run.jobs["runtime_s"][done] / run.jobs["work_s"][done]
    assert (slow >= 1 - 1e-9).all() and (slow > 1.01).any()
    # node caps: every node got the even split at t = 0, then dynshare moved cap between nodes
    with (out / "node_caps.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    first = [r for r in rows if float(r["t_s"]) == 0.0]
    assert len(first) == run.info["nodes"] == 100
    caps = {float(r["cap_w"]) for r in first}
    assert len(caps) == 1
    later = {round(float(r["cap_w"])) for r in rows if float(r["t_s"]) > 0 and r["cap_w"]}
    assert len(later) > 5  # caps differ across nodes and time
    assert rows[0]["name"].startswith("node")
    assert (out / "node_caps.png").stat().st_size > 10_000
    page = (out / "report.html").read_text()
    assert "<h2>Node caps</h2>" in page and "cap changes on 100 nodes" in page
    # no demand-response section for a run with node caps only
    assert not (out / "dr_events.csv").exists() and "Demand response" not in page


@pytest.mark.slow
def test_the_response_option_and_standard_bsld_on_the_command_line(tmp_path, capsys):
    # the even split caps every running job's nodes, so the response model decides how much they slow down
    base = ["simulate", "--trace", str(KTH), "--policy", "simple", "--param", "allocation=even", "--cap", "50%",
            "--time-limit", "43200", "-q", "--json"]
    runs = {}
    for name, extra in (("f0", ["--response", "0"]), ("f1", ["--response", "1"]),
                        ("std", ["--response", "1", "--bsld-definition", "standard", "--bsld-threshold", "10"])):
        assert main([*base, "--out", str(tmp_path / name), *extra]) == 0
        runs[name] = json.loads(capsys.readouterr().out)
    # F = 0: caps cost no time; F = 1: jobs run longer and the Eq. 3 slowdown counts it
    r0, _ = load_run(tmp_path / "f0")
    done = r0.jobs["state"] == "COMPLETED"
    assert np.allclose(r0.jobs["runtime_s"][done], r0.jobs["work_s"][done])
    assert runs["f1"]["mean_bsld"] > runs["f0"]["mean_bsld"]
    assert runs["std"]["bsld_definition"] == "standard" and runs["std"]["bsld_threshold_s"] == 10.0
    # a response option that disagrees with the policy's parameter is refused, naming the option
    assert main([*base, "--out", str(tmp_path / "bad"), "--response", "cpi", "--param", "response=mixed"]) == 2
    err = capsys.readouterr().err
    assert "--response: 'cpi' differs from the policy's response parameter 'mixed'" in err
    assert main([*base, "--out", str(tmp_path / "bad"), "--response", "fast"]) == 2
    assert "--response: unknown response 'fast'" in capsys.readouterr().err
