"""The CLI end to end, as a user runs it: simulate, report, traces, check-config, demo."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from builders import TINY_SWF, cli, tiny_trace
from wattsched.cli import main
from wattsched.sim.report import load_run


@pytest.fixture
def trace(tmp_path):
    """The tiny four-job trace, written to this test's directory."""
    return tiny_trace(tmp_path)


def test_simulate_writes_a_complete_run_directory(trace, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", "--trace", str(trace), "--policy", "easy", "--cap", "1500", "--out", str(out),
                 "-q", "--seed", "4"]) == 0
    printed = capsys.readouterr().out
    assert "time above cap" in printed and "tiny on 8 nodes, policy easy" in printed
    for name in ("summary.json", "jobs.csv", "timeline.csv", "power.png", "utilization.png", "wait_slowdown.png",
                 "report.html", "workload.csv.gz"):
        assert (out / name).exists(), name
    run, summary = load_run(out)
    # EASY on the tiny trace (t rebased to 0 at job 1): job 3 backfills at t=20 next to job 1,
    # job 2 (8 nodes) starts when job 1 ends, job 4 after it; job 4 ran 100 s but asked 50: killed.
    starts = dict(zip(run.jobs["id"].tolist(), run.jobs["start_s"].tolist()))
    assert starts == {1: 0.0, 2: 50.0, 3: 20.0, 4: 80.0}
    assert run.jobs["state"].tolist() == ["COMPLETED", "COMPLETED", "COMPLETED", "TIMEOUT"]
    assert summary["n_jobs"] == 4 and summary["jobs_timeout"] == 1
    assert run.info["power_augmented"] is True and run.info["origin_unix_s"] == 1000100
    # the energy in the summary is the integral of the written timeline
    t, p = run.timeline["t_s"], run.timeline["power_w"]
    assert summary["energy_j"] == pytest.approx(float(np.sum(p[:-1] * np.diff(t))))
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "tiny" in html


def test_rerun_from_the_recorded_workload_is_identical(trace, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["simulate", "--trace", str(trace), "--out", str(a), "-q", "--seed", "9", "--no-report"]) == 0
    assert main(["simulate", "--trace", str(a / "workload.csv.gz"), "--procs", "8", "--out", str(b), "-q",
                 "--no-report"]) == 0
    ra, sa = load_run(a)
    rb, sb = load_run(b)
    assert ra.jobs["energy_j"].tolist() == rb.jobs["energy_j"].tolist()
    assert sa["energy_j"] == sb["energy_j"]
    assert not (b / "workload.csv.gz").exists()  # it had power already: nothing to augment


def test_seed_changes_the_augmented_power(trace, tmp_path):
    runs = []
    for seed in (1, 2):
        out = tmp_path / f"s{seed}"
        main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--seed", str(seed), "--no-report"])
        runs.append(load_run(out)[1]["energy_j"])
    assert runs[0] != runs[1]


def test_report_regenerates_missing_plots(trace, tmp_path):
    out = tmp_path / "run"
    main(["simulate", "--trace", str(trace), "--out", str(out), "-q"])
    (out / "power.png").unlink()
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "power.png").exists() and (out / "report.html").exists()


def test_config_file_with_cli_override(trace, tmp_path, capsys):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"trace: {trace.name}\nprocs: 8\npolicy: easy\nparams:\n  order: saf\ncap_w: 50%\nseed: 3\n")
    out = tmp_path / "run"
    assert main(["simulate", "--config", str(cfg), "--policy", "fcfs", "--out", str(out), "-q", "--json",
                 "--no-report"]) == 2
    captured = capsys.readouterr()
    # fcfs has no params: the file's params are now invalid and the error names the key
    assert "params.order" in captured.err
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "-q", "--json", "--no-report"]) == 0
    summary = json.loads(capsys.readouterr().out)
    run, _ = load_run(out)
    assert run.info["params"] == {"order": "saf"}
    assert summary["n_jobs"] == 4


def test_errors_name_the_file_line_and_key(tmp_path, capsys):
    bad = tmp_path / "bad.swf"
    bad.write_text(
        "; MaxProcs: 4\n"
        "1 0 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n"
        "2 5 0 x 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n"
    )
    assert main(["simulate", "--trace", str(bad), "--out", str(tmp_path / "r"), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"wattsched: error: {bad}:3: run_time: not a number: 'x' (field 4)" in err
    assert main(["simulate", "--trace", str(bad), "--skip-bad-lines", "--out", str(tmp_path / "r"), "-q"]) == 0
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("trace: t.swf\nprocs: 4\ncap_w: lots\n")
    assert main(["check-config", str(cfg)]) == 2
    assert f"{cfg}:3: cap_w: expected watts" in capsys.readouterr().err
    assert main(["simulate", "--trace", str(tmp_path / "missing.swf"), "-q"]) == 2
    assert "missing.swf" in capsys.readouterr().err


def test_check_config_accepts_a_valid_file(trace, tmp_path, capsys):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"trace: {trace}\npolicy: easy\ncap_w: 60%\n")
    assert main(["check-config", str(cfg)]) == 0
    assert "valid simulation config (easy on 8 nodes)" in capsys.readouterr().out


def test_traces_info_counts(trace, capsys):
    assert main(["traces", "info", str(trace), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["jobs"] == 4 and info["max_procs"] == 8 and info["runtime_exceeds_walltime"] == 1
    assert math.isclose(info["span_s"], 30.0)


def test_policies_lists_params(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert "easy" in out and "order = 'fcfs'" in out


def test_console_script_and_module_entry_point(tmp_path):
    out = cli("--help")
    assert out.returncode == 0 and "simulate" in out.stdout
    out = cli("simulate", "--help")
    assert "--cap-schedule" in out.stdout


def test_simulate_as_a_program_prints_everything_and_exits_with_its_status(trace, tmp_path, capsys):
    # run as the program, simulate ends the process without the interpreter's finalisation:
    # its output through a pipe must still be all of it, and its exit status the command's
    out = cli("simulate", "--trace", trace, "--out", tmp_path / "run", "-q")
    assert out.returncode == 0, out.stderr
    assert main(["simulate", "--trace", str(trace), "--out", str(tmp_path / "here"), "-q"]) == 0
    assert out.stdout == capsys.readouterr().out and "mean bounded slowdown" in out.stdout
    load_run(tmp_path / "run")
    bad = cli("simulate", "--trace", tmp_path / "none.swf", "-q")
    assert bad.returncode == 2 and "no such file" in bad.stderr


@pytest.mark.slow
def test_demo_runs_on_the_bundled_trace(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "-q"]) == 0
    run, summary = load_run(out)
    assert summary["n_jobs"] == 5000 and run.info["policy"] == "easy-pc" and run.info["predictor"] == "history"
    # EASY+PC on predicted power stays under the 60 % cap of the capped week nearly all the time
    # (predictions err: a little time above is expected); uncapped EASY is reported next to it
    assert summary["frac_capped_time_above_cap"] < 0.05 and summary["jobs_unfinished"] == 0
    assert summary["baseline_policy"] == "easy" and summary["mean_turnaround_change_pct"] is not None
    assert (out / "report.html").exists()


def test_bad_predictor_or_baseline_fails_before_running(trace, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--baseline", "nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "-q", "--predictor", "history",
                 "--predictor-param", "alpha=-1"]) == 2
    assert "--predictor-param: alpha: Input should be greater than or equal to 0" in capsys.readouterr().err
    assert not (out / "jobs.csv").exists()
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"trace: {trace}\npredictor: crystal-ball\n")
    assert main(["check-config", str(cfg)]) == 2
    assert "unknown predictor 'crystal-ball'" in capsys.readouterr().err


def test_a_demand_response_event_in_the_config_caps_the_replay_from_its_start(trace, tmp_path, capsys):
    cfg = tmp_path / "dr.yaml"
    cfg.write_text(f"trace: {trace}\nprocs: 8\npolicy: easy-pc\nparams: {{check: max}}\n"
                   "demand_response:\n  - {notice_s: 100, start_s: 115, end_s: 200, cap_w: 1000}\n")
    out = tmp_path / "run"
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "-q", "--no-report"]) == 0
    run, _ = load_run(out)
    t, cap = run.timeline["t_s"], run.timeline["cap_w"]
    assert set(cap[(t >= 115) & (t < 200)].tolist()) == {1000.0}
    assert np.isinf(cap[t < 115]).all() and np.isinf(cap[t >= 200]).all()


def test_simulate_summary_reads_as_text_not_python(tmp_path, capsys):
    trace = tmp_path / "bad.swf"
    trace.write_text(TINY_SWF + "5 140 0 10 -1 -1 -1 -1 20 -1 1 1 1 -1 1 -1 -1 -1\n")  # no processor count
    assert main(["simulate", "--trace", str(trace), "--policy", "easy-pc", "--cap", "1500", "--out",
                 str(tmp_path / "run"), "-q", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "bad on 8 nodes, policy easy-pc (check: gaussian_99, order: fcfs, lookahead: always)" in printed
    assert "cleaning: dropped procs missing: 1 job\n" in printed
    assert not any(token in printed for token in ("{'", "True", "False", "None"))


def test_readable_values_and_cleaning():
    from wattsched.sim.metrics import cleaning_text, readable

    assert readable({"requeue": False, "p_off_w": None, "cap_margin": 0.01}) == (
        "requeue: no, p_off_w: default, cap_margin: 0.01")
    assert cleaning_text({"dropped": {"procs_missing": 2, "runtime_missing": 0}, "skipped_lines": 3}) == (
        "dropped procs missing: 2 jobs; skipped 3 malformed lines")
    assert cleaning_text({"dropped": {}, "skipped_lines": 1}) == "skipped 1 malformed line"


@pytest.mark.parametrize("argv", [
    ["simulate", "--trace", "t.swf", "--policy", "easy", "-q", "--out", "runs/x"],
    ["-vv", "--verbose", "simulate", "--trace", "t.swf", "--cap", "60%", "--param", "a=1", "--moldable", "0.3",
     "--predictor", "history", "--predictor-param", "k=2", "--seed", "3", "--no-report", "--json"],
])
def test_a_simulate_command_line_parses_alike_with_the_simulate_parser_alone(argv):
    from wattsched.cli import _is_simulate, build_parser

    assert _is_simulate(argv)
    assert vars(build_parser(simulate_only=True).parse_args(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", [["-h", "simulate"], ["--version"], ["demo"], ["traces", "simulate"], ["-vh"],
                                  ["--verb", "simulate"], []])
def test_other_command_lines_get_every_command(argv):
    from wattsched.cli import _is_simulate

    assert not _is_simulate(argv)


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["-v", "--help"])
    out = capsys.readouterr().out
    assert "simulate" in out and "demo" in out and "sweep" in out
