"""``wattsched_held_jobs{reason}`` takes a small fixed set of values, whatever the policies write in their reasons.

The reasons are found in the source of the built-in policies (and of the unit
mapping every plan goes through): each ``Reason(...)`` template, each string
or f-string put in ``plan.reasons`` or ``default_reason``. Every one must have
a kind from :data:`REASON_KINDS` other than ``other``; a new reason whose
words no rule knows fails here, with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import wattsched.policies as policies_pkg
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.model.plan import Reason
from wattsched.model.reasons import REASON_KINDS, reason_kind
from wattsched.policies import REGISTRY

SRC = Path(policies_pkg.__file__).parent
FILES = [*sorted(SRC.glob("*.py")), SRC.parent / "model" / "units.py"]
FORWARDED = {"reason", "sub.default_reason", "sub.reasons"}
"""Reasons passed through from a caller or an inner policy (scanned where they are written)."""


def _texts(node: ast.AST, consts: dict[str, str]) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):  # an f-string: its words, with {} for the values
        return ["".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)]
    if isinstance(node, ast.IfExp):
        a, b = _texts(node.body, consts), _texts(node.orelse, consts)
        return None if a is None or b is None else a + b
    if isinstance(node, ast.Name) and node.id in consts:
        return [consts[node.id]]
    return None


def _is_reasons(target: ast.AST) -> bool:
    return isinstance(target, ast.Subscript) and (
        (isinstance(target.value, ast.Attribute) and target.value.attr == "reasons")
        or (isinstance(target.value, ast.Name) and target.value.id == "reasons"))


def policy_reasons() -> list[tuple[str, int, str | None, str]]:
    """``(file, line, text or None, source)`` of every reason written in the policies' source."""
    out = []
    for path in FILES:
        tree = ast.parse(path.read_text())
        consts = {}
        for n in tree.body:  # module-level reason templates (_HEAD_REASON = "...")
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                try:
                    value = ast.literal_eval(n.value)
                except ValueError:
                    continue
                if isinstance(value, str):
                    consts[n.targets[0].id] = value
        for node in ast.walk(tree):
            written: list[ast.AST] = []
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name == "Reason" and node.args:
                    written.append(node.args[0])
                if name == "start_in_order" and len(node.args) >= 4:
                    written.append(node.args[3])
                written += [k.value for k in node.keywords if k.arg == "default_reason"]
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if _is_reasons(t) or (isinstance(t, ast.Attribute) and t.attr == "default_reason"):
                        if not (isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "Reason"):
                            written.append(node.value)
            for value in written:
                texts = _texts(value, consts)
                for text in texts if texts is not None else [None]:
                    out.append((path.name, node.lineno, text, ast.unparse(value)))
    return out


REASONS = policy_reasons()


def test_the_scan_sees_the_reasons_of_every_policy_module():
    modules = {target.split(":")[0].rsplit(".", 1)[1] + ".py" for target in REGISTRY.builtin.values()}
    with_reasons = {f for f, _, text, _ in REASONS if text}
    # policies without a reason of their own wrap one that has them (bf, simple, dvfs, dynshare: easy, ls, ...)
    assert {"fcfs.py", "easy.py", "easy_pc.py", "knapsack.py", "budget.py", "dr.py", "prb.py", "cp.py"} <= with_reasons
    assert modules <= {p.name for p in FILES}
    assert len([r for r in REASONS if r[2]]) >= 25


@pytest.mark.parametrize("where, text, source", [(f"{f}:{line}", text, src) for f, line, text, src in REASONS],
                         ids=lambda v: v if isinstance(v, str) and ".py:" in v else "")
def test_every_reason_a_policy_gives_has_a_kind(where, text, source):
    if text is None:
        assert source in FORWARDED, f"{where}: cannot read the reason {source!r}; give it a literal template"
        return
    if text == "":
        assert where.startswith("cp.py"), f"{where}: a reason-less plan"  # dec's first mapping, never returned
        return
    kind = reason_kind(text)
    assert kind in REASON_KINDS and kind != "other", f"{where}: {text!r} has no kind; add a rule to _RULES"


def test_known_reasons_get_the_kind_an_operator_expects():
    from wattsched.policies.budget import _HEAD_REASON as BUDGET_HEAD
    from wattsched.policies.easy import _HEAD_REASON as EASY_HEAD
    from wattsched.policies.easy_pc import _HEAD_REASON as EASY_PC_HEAD

    assert reason_kind(Reason(EASY_HEAD, 4, 2, 100.0)) == "nodes"
    assert reason_kind(Reason(EASY_PC_HEAD, 4, 2, "max", "t=100s")) == "power_cap"
    assert reason_kind(BUDGET_HEAD) == "budget"
    assert reason_kind("does not fit before the head job's reservation") == "reservation"
    assert reason_kind("behind an earlier job (strict FCFS)") == "queue_order"


def _held_samples(metrics: DaemonMetrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {s.labels["reason"]: s.value for fam in text_string_to_metric_families(text)
            if fam.name == "wattsched_held_jobs" for s in fam.samples}


def test_the_metric_counts_by_kind_and_never_carries_a_template():
    m = DaemonMetrics()
    assert _held_samples(m) == dict.fromkeys(REASON_KINDS, 0.0)  # every series from the start
    m.set_held_reasons({
        "head of queue: needs {} nodes ({} free) and predicted power under the cap ({} check); reservation: {}": 1,
        "does not fit now (nodes or predicted power) without delaying the head job": 5,
        "waiting for 3 nodes (1 free)": 2,  # a plain-text reason: its numbers stay out of the label too
        "waiting for {} nodes ({} free)": 1,
        "a reason of a third-party policy": 4,
        "waiting": 1,
    })
    assert _held_samples(m) == {"nodes": 3.0, "power_cap": 1.0, "budget": 0.0, "reservation": 5.0,
                                "queue_order": 0.0, "other": 5.0}
    m.set_held_reasons({})
    assert set(_held_samples(m).values()) == {0.0}
