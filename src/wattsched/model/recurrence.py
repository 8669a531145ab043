"""Recurring windows as written in config files: ``DAYS HH:MM-HH:MM``. Pure parsing; no clock, no I/O.

A window is written in the site's time zone (``timezone`` in the daemon config),
e.g. ``weekdays 17:00-20:00``, ``daily 12:00-14:00``, ``sat,sun 00:00-24:00`` or
``mon-thu 22:00-06:00`` (a window whose end is not after its start runs past
midnight into the next day). Days are ``daily``, ``weekdays``, ``weekends``, or
day names ``mon``..``sun`` separated by commas, with ranges such as ``mon-fri``.

The daemon config (:mod:`wattsched.config.daemon`) checks its ``every`` keys
with :func:`parse_recurrence` when it is validated; the daemon
(:mod:`wattsched.daemon.schedule`) lays the windows out on the wall clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DAYS", "Recurrence", "parse_recurrence"]

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_ALIASES = {"daily": range(7), "weekdays": range(5), "weekends": range(5, 7), "weekend": range(5, 7),
            "everyday": range(7)}
_RE = re.compile(r"^\s*(?P<days>[A-Za-z,\-\s]+?)\s+(?P<h0>\d{1,2}):(?P<m0>\d{2})\s*-\s*"
                 r"(?P<h1>\d{1,2}):(?P<m1>\d{2})\s*$")


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A window that recurs on some days of the week, from ``start_min`` to ``end_min`` minutes after midnight.

    >>> r = parse_recurrence("weekdays 17:00-20:00")
    >>> sorted(r.days), r.start_min, r.end_min
    ([0, 1, 2, 3, 4], 1020, 1200)
    """

    days: frozenset[int]
    start_min: int
    end_min: int
    text: str = ""

    @property
    def length_min(self) -> int:
        return self.end_min - self.start_min if self.end_min > self.start_min else self.end_min + 1440 - self.start_min


def parse_recurrence(text: str) -> Recurrence:
    """Parse ``DAYS HH:MM-HH:MM``; raises ``ValueError`` saying what is expected.

    >>> parse_recurrence("mon-wed,sat 22:00-06:00").length_min
    480
    >>> parse_recurrence("often 1:00-2:00")
    Traceback (most recent call last):
    ...
    ValueError: unknown day 'often' in 'often 1:00-2:00'; use daily, weekdays, weekends, or mon..sun \
with commas and ranges, e.g. 'weekdays 17:00-20:00'
    """
    m = _RE.match(text or "")
    if not m:
        raise ValueError(f"expected 'DAYS HH:MM-HH:MM' such as 'weekdays 17:00-20:00', got {text!r}")
    days: set[int] = set()
    for part in re.split(r"\s*,\s*", m["days"].strip().lower()):
        if part in _ALIASES:
            days.update(_ALIASES[part])
            continue
        ends = [p.strip()[:3] for p in part.split("-")]
        if not 1 <= len(ends) <= 2 or any(e not in DAYS for e in ends):
            raise ValueError(f"unknown day {part!r} in {text!r}; use daily, weekdays, weekends, or mon..sun with "
                             "commas and ranges, e.g. 'weekdays 17:00-20:00'")
        a, b = DAYS.index(ends[0]), DAYS.index(ends[-1])
        days.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    h0, m0, h1, m1 = (int(m[k]) for k in ("h0", "m0", "h1", "m1"))
    if h0 > 23 or m0 > 59 or m1 > 59 or h1 > 24 or (h1 == 24 and m1):
        raise ValueError(f"times must be HH:MM between 00:00 and 24:00, got {text!r}")
    start, end = h0 * 60 + m0, h1 * 60 + m1
    if start == end:
        raise ValueError(f"window {text!r} is empty (start = end)")
    return Recurrence(frozenset(days), start, end, text.strip())
