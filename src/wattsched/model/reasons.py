"""The kind of a waiting reason: a small fixed vocabulary for metric labels.

A policy explains why each pending job waits in words and numbers
(``Reason("waiting for {} nodes ({} free)", 4, 2)`` or a plain string); the
full text goes to the audit log, ``wattsched status`` and the job's comment.
A Prometheus label must not take one value per job or per number, so
``wattsched_held_jobs{reason}`` counts jobs by :func:`reason_kind` of their
reason, one of :data:`REASON_KINDS`:

``nodes``
    waiting for free nodes (or for room on shared nodes);
``power_cap``
    its (predicted) power does not fit under the cap in force or announced,
    including the head job of a power-checking policy, which waits for nodes
    and power together;
``budget``
    the energy budget (the energy policies' head job and their reservation);
``reservation``
    it cannot start before the head job's reservation without delaying it
    (backfilling found no room);
``queue_order``
    behind an earlier or a more profitable job, or placed later by the
    policy's own schedule (strict FCFS, the knapsack's stop, the CP model);
``other``
    a reason outside this list (a third-party policy) or none given.

The kind is read from the reason's template (or text), never from its
numbers, by the first matching rule of :data:`_RULES`; the test
``tests/unit/test_reason_kinds.py`` checks that every reason a built-in
policy can give has a kind other than ``other``.
"""

from __future__ import annotations

REASON_KINDS = ("nodes", "power_cap", "budget", "reservation", "queue_order", "other")
"""Every value the ``reason`` label of ``wattsched_held_jobs`` takes."""

_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # first match wins: the specific phrases before the words they contain
    ("nodes", ("shares its nodes",)),
    ("budget", ("c_ea", "budget")),
    ("reservation", ("head job", "head's reservation")),
    ("queue_order", ("behind ", "scheduled later", "knapsack stops at")),
    ("power_cap", ("cap", "power")),
    ("nodes", ("node", "units")),
)


def reason_kind(reason: object) -> str:
    """The kind of a waiting reason (a :class:`~wattsched.model.plan.Reason`, its template, or text).

    >>> reason_kind("waiting for {} nodes ({} free)"), reason_kind("behind an earlier job (strict FCFS)")
    ('nodes', 'queue_order')
    >>> reason_kind("its power at {:.2f} GHz ({:.0f} W) would exceed the cap ({:.0f} W of {:.0f} W)")
    'power_cap'
    >>> reason_kind(""), reason_kind("waiting"), reason_kind("a reason of a plugin")
    ('other', 'other', 'other')
    """
    text = getattr(reason, "template", reason)
    text = str(text).lower() if text is not None else ""
    for kind, words in _RULES:
        if any(w in text for w in words):
            return kind
    return "other"
