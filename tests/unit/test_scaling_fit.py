"""`wattsched models fit --model pass`: PASS parameters back from (n, p, time) points, and bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from wattsched.errors import ConfigError
from wattsched.model.scaling import PassModel, cpu_frequency
from wattsched.scalingmodels import fit_pass, read_pass_measurements

pytest.importorskip("scipy", reason="fitting PASS needs scipy (extra [dr])")

# AMR's power side (Table IV) with a parallelism the node counts can see, in Downey's high-variance branch
TRUE = PassModel(a=2.45, b=6.57, c=13.5, p_l=32, p_h=54, beta=0.33, A=24, sigma=1.5, T1=20000.0)
NODES = (1, 2, 4, 8, 16, 24, 32, 48, 64)
CAPS = (32, 34, 36, 39, 45, 55, 60)


def wattsched(*args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it (a new process)."""
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=300)


def run_cli(capsys, *args: str) -> subprocess.CompletedProcess:
    """The same command line in this process (``main``, its error boundary and argparse's exit included)."""
    from wattsched.cli import main

    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as exc:  # argparse refuses an option value
        rc = exc.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def write_points(path, model=TRUE, noise=0.0, freq=True, nodes=NODES, caps=CAPS):
    rng = np.random.default_rng(7)
    rows = ["# generated from known PASS parameters", "app,nodes,cpu_power_w,time_s" + (",freq_ghz" if freq else "")]
    for n in nodes:
        for p in caps:
            t = model.time(n, p) * float(np.exp(noise * rng.standard_normal()))
            f = f",{cpu_frequency(p, model.a, model.b, model.c):.9f}" if freq else ""
            rows.append(f"amr,{n},{p},{t:.6f}{f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_cli_fits_known_parameters_back(tmp_path):
    csv = write_points(tmp_path / "amr.csv")
    r = wattsched("models", "fit", "--model", "pass", str(csv), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["amr"]
    # noise-free points printed to 6 decimals: every parameter within 1e-4 relative (the fit reaches ~1e-9)
    for key, value in TRUE.spec().items():
        assert got[key] == pytest.approx(value, rel=1e-4), key
    assert got["time_error"] < 1e-6 and got["points"] == len(NODES) * len(CAPS)
    text = wattsched("models", "fit", "--model", "pass", str(csv))
    assert text.returncode == 0 and "amr" in text.stdout and "beta 0.3300" in text.stdout and "A 24" in text.stdout


def test_a_noisy_fit_lands_near_the_truth(tmp_path):
    # 1 % log-normal noise on every time, one seed: the tolerances are those this seed meets with room
    fit = fit_pass(read_pass_measurements(write_points(tmp_path / "n.csv", noise=0.01)))["amr"]
    assert fit.beta == pytest.approx(0.33, abs=0.01)
    assert fit.p_h == pytest.approx(54, abs=1.5)
    parallelism, one_node_s = fit.A, fit.T1
    assert parallelism == pytest.approx(24, rel=0.05) and fit.sigma == pytest.approx(1.5, abs=0.1)
    assert one_node_s == pytest.approx(20000, rel=0.02)
    assert 0.002 < fit.time_error < 0.02


def test_given_power_model_and_one_node_count(tmp_path, capsys):
    # the paper's profile: 20 nodes only; a, b, c given; Downey's parameters cannot be fitted
    csv = write_points(tmp_path / "p20.csv", freq=False, nodes=(20,))
    r = run_cli(capsys, "models", "fit", "--model", "pass", "--power-model", "2.45,6.57,13.5", str(csv), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["amr"]
    assert got["beta"] == pytest.approx(0.33, rel=1e-4) and got["p_h"] == pytest.approx(54, rel=1e-4)
    assert got["A"] is None and got["T1"] is None
    assert got["t_h_by_nodes"]["20"] == pytest.approx(TRUE.time(20, 54), rel=1e-6)
    fit = fit_pass(read_pass_measurements(csv), str(csv), (2.45, 6.57, 13.5))["amr"]
    with pytest.raises(ConfigError, match="fewer than 3 node counts"):
        fit.model  # noqa: B018


@pytest.mark.parametrize(("text", "args", "expected"), [
    ("app,nodes,time_s\namr,4,100\n", (), ":1: cpu_power_w: missing column"),
    ("app,nodes,cpu_power_w,time_s\namr,4,40,100\namr,8,4O,60\n", (), ":3: cpu_power_w: not a number: '4O'"),
    ("app,nodes,cpu_power_w,time_s\namr,4,40,100\namr,8,40\n", (), ":3: time_s: missing value"),
    ("app,nodes,cpu_power_w,time_s\namr,0,40,100\n", (), ":2: nodes: must be a number >= 1, got 0"),
    ("app,nodes,cpu_power_w,time_s\namr,4,-40,100\n", (), ":2: cpu_power_w: must be a positive number"),
    ("app,nodes,cpu_power_w,time_s,freq_ghz\namr,4,40,100,1.5\namr,4,45,90,\n", (), ":3: freq_ghz: missing value"),
    ("app,nodes,cpu_power_w,time_s\namr,4,40,100\namr,8,45,60\n", ("--power-model", "2.45,6.57,13.5"),
     "app 'amr': needs measurements at 3 or more distinct CPU caps .* got 2"),
    ("app,nodes,cpu_power_w,time_s,freq_ghz\namr,4,40,100,1.6\namr,4,45,90,1.6\namr,4,50,80,1.6\n", (),
     "app 'amr': needs 3 or more distinct frequencies .* got 1"),
    ("app,nodes,cpu_power_w,time_s\namr,4,40,100\namr,4,45,90\namr,4,50,80\n", (),
     "app 'amr': a, b, c .* add a freq_ghz column, or give them with --power-model"),
    ("app,nodes,cpu_power_w,time_s\namr,4,12,100\namr,4,45,90\namr,4,50,80\n", ("--power-model", "2.45,6.57,13.5"),
     "app 'amr': the lowest cap, 12 W, is not above the CPU base power c = 13.5 W"),
    ("# only a comment\n", (), ": no rows"),
    ("app,nodes,cpu_power_w,time_s\namr,4,40,100\namr,8,45,60\namr,16,50,30\n", ("--power-model", "2.45,6.57,13.5"),
     "app 'amr': needs 5 or more points for the 5 time parameters it fits here, got 3"),
])
def test_bad_input_names_the_file_and_line(tmp_path, capsys, text, args, expected):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    r = run_cli(capsys, "models", "fit", "--model", "pass", str(path), *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert str(path) in r.stderr
    assert re.search(re.escape(str(path)) + ".*" + expected, r.stderr), r.stderr


def test_cli_options_that_do_not_apply_are_refused(tmp_path, capsys):
    r = run_cli(capsys, "models", "fit", "--model", "pass", "packaged")
    assert r.returncode == 2 and "no packaged PASS measurements" in r.stderr
    csv = write_points(tmp_path / "x.csv")
    r = run_cli(capsys, "models", "fit", "--model", "pass", str(csv), "--platform-snippet")
    assert r.returncode == 2 and "--platform-snippet: PASS models are not platform response classes" in r.stderr
    r = run_cli(capsys, "models", "fit", "--model", "pass", "--power-model", "1,2", str(csv))
    assert r.returncode == 2 and "--power-model: give three numbers A,B,C" in r.stderr
    r = run_cli(capsys, "models", "fit", "--power-model", "1,2,3", "packaged")
    assert r.returncode == 2 and "--power-model: only for --model pass" in r.stderr


def test_a_given_power_model_wins_over_the_frequency_column(tmp_path):
    csv = write_points(tmp_path / "x.csv", nodes=(4, 8, 16))
    fit = fit_pass(read_pass_measurements(csv), str(csv), (1.65, 7.74, 13.5))["amr"]
    assert (fit.a, fit.b, fit.c) == (1.65, 7.74, 13.5)
    assert fit.time_error > 1e-4  # the wrong power model cannot reproduce AMR's times exactly
