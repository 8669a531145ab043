"""Times as the daemon's commands and audit print them: local date-times, never raw epoch seconds."""

from __future__ import annotations

import datetime as dt


def local_time(t: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """Epoch seconds as local time; a time no calendar holds (a cap step at 1e300 s) as far past or never.

    >>> local_time(1e300, "%Y")
    'never (1e+300 s, beyond year 9999)'
    >>> local_time(0.0) == dt.datetime.fromtimestamp(0).strftime("%Y-%m-%d %H:%M:%S")
    True
    """
    try:
        return dt.datetime.fromtimestamp(t).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return f"never ({t:g} s, beyond year 9999)" if t > 0 else f"{t:g} s (before year 1)"
