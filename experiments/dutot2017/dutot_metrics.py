"""Per-run measures of the Dutot et al. 2017 reproduction, called by `wattsched sweep` on each worker."""

from __future__ import annotations

from typing import Any

P_COMP_HAT_W = 203.12
"""P̃_comp of Table I: 100 % budget = every node computing at this power over the budget window."""


def week_metrics(result, run: dict) -> dict[str, Any]:
    """Utilization and energy over the week (jobs after it excluded), AVEbsld and jobs started over all jobs."""
    from wattsched.sim.metrics import budget_metrics

    spec = run["spec"]
    sim = spec.get("sim", spec)  # the simulation keys of the resolved run
    ws, we = run["window"]
    budgets = sim.get("energy_budgets") or []
    nodes = len(run["platform"].nodes)
    energy_j = budgets[0]["energy_j"] if budgets else None
    span_s = budgets[0]["end_s"] - budgets[0]["start_s"] if budgets else None
    m = budget_metrics(result, ws, we)
    row = {f"week_{k}": v for k, v in m.items()}
    row["budget_pct"] = round(100 * energy_j / (nodes * P_COMP_HAT_W * span_s)) if budgets else None
    params = sim.get("params") or {}
    row["shutdown"] = params.get("shutdown", "never") != "never"
    if budgets:
        # The energy of the budget window itself, against the budget.
        w0 = ws + budgets[0]["start_s"]
        wm = budget_metrics(result, w0, w0 + span_s, energy_j)
        row["budget_window_energy_j"] = wm["energy_j"]
        row["budget_window_relative_energy"] = wm["relative_energy"]
    return row
