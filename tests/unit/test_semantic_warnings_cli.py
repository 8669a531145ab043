"""Semantic warnings through the commands a user runs: check-config and simulate say the same, and go on.

A constraint the chosen policy ignores (its ``constraints`` tag), a budget below the idle floor, budget and
cap-schedule windows and demand-response events outside the trace's span, a demand-response reduction at or
above the platform's power: each is warned about on stderr by ``wattsched check-config`` (exit 0, "valid")
and by ``wattsched simulate`` (exit 0, the note kept in summary.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import cli, kth_excerpt, read_summary


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The bundled KTH excerpt's header and its first 200 jobs (submissions over about 60 h)."""
    return kth_excerpt(tmp_path_factory.mktemp("sem"))


CASES = {
    "cap ignored by the policy": (
        "policy: easy\ncap_w: '60%'\n",
        "policy easy ignores the power cap of this run (cap_w): no decision respects it"),
    "demand response ignored by the policy": (
        "policy: easy\nplatform: ahmed2017\n"
        "demand_response: [{notice_s: 0, start_s: 3600, end_s: 7200, reduction_w: 1000}]\n",
        "policy easy ignores the demand-response event of this run (demand_response)"),
    "budget below the idle floor": (
        "policy: energy-bud\nenergy_budgets: [{start_s: 0, end_s: 86400, energy_j: 1.0e+8}]\n",
        "energy_budgets[0]: the budget of 1e+08 J is below the platform's idle energy over its window"),
    "budget window after the trace": (
        "policy: energy-bud\nenergy_budgets: [{start_s: 1.0e+7, end_s: 1.1e+7, energy_j: 1.0e+30}]\n",
        "energy_budgets[0]: the budget window (1e+07 s to 1.1e+07 s) starts after the trace's last submission"),
    "cap window after the trace": (
        "policy: easy-pc\ncap_schedule: [{start_s: 1.0e+7, end_s: 1.1e+7, cap_w: '60%'}]\n",
        "W (1e+07 s to 1.1e+07 s) starts after the trace's last submission"),
    "demand-response event before the trace": (
        "policy: dr\nplatform: ahmed2017\n"
        "demand_response: [{notice_s: -20000, start_s: -10000, end_s: -5000, reduction_w: 1000}]\n",
        "demand_response[0]: the event (-20,000 s to -5,000 s) ends before the trace's first submission"),
    "demand-response reduction above the platform's power": (
        "policy: dr\nplatform: ahmed2017\n"
        "demand_response: [{notice_s: 0, start_s: 3600, end_s: 7200, reduction_w: 1.0e+9}]\n",
        "demand_response[0]: the reduction of 1,000,000,000 W is at or above the platform's maximum power"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_config_and_simulate_warn_and_go_on(base, tmp_path, case):
    body, note = CASES[case]
    (tmp_path / "sim.yaml").write_text(f"trace: {base}\n{body}")
    check = cli("check-config", "sim.yaml", cwd=tmp_path)
    assert check.returncode == 0 and "valid simulation config" in check.stdout, check.stderr
    assert note in check.stderr, check.stderr
    assert "Traceback" not in check.stderr
    run = cli("simulate", "--config", "sim.yaml", "--out", "r", "-q", "--no-report", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert note in run.stderr, run.stderr
    assert note in json.dumps(read_summary(tmp_path / "r"))


def test_no_warning_for_constraints_the_policy_plans_against_inside_the_trace(base, tmp_path):
    (tmp_path / "sim.yaml").write_text(f"trace: {base}\npolicy: easy-pc\n"
                                       "cap_schedule: [{start_s: 3600, end_s: 7200, cap_w: '60%'}]\n")
    check = cli("check-config", "sim.yaml", cwd=tmp_path)
    assert check.returncode == 0 and "warning" not in check.stderr.lower() and "cap_schedule" not in check.stderr
