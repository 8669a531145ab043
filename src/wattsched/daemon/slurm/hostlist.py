"""Slurm hostlist expressions: ``n[1-3,5]`` <-> ``("n1", "n2", "n3", "n5")``.

Slurm prints node sets in its compressed *hostlist* form everywhere (``squeue``
``nodes``, ``scontrol`` ``NodeList=``/``ReqNodeList=``, slurm.conf). The grammar
is described under "HOSTLIST EXPRESSIONS" in ``scontrol(1)``
(https://slurm.schedmd.com/scontrol.html): comma-separated elements, each a
name with zero or more bracketed groups of numbers and ranges; a range keeps the
zero padding of its lower bound (``c[01-10]``), and several groups form the
cartesian product (``rack[1-2]n[1-2]``).

Both functions are pure; :func:`expand` rejects malformed input with a
``ValueError`` that quotes the expression.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["compress", "expand"]

# Guard against a typo such as ``n[1-100000000]`` exhausting memory.
MAX_HOSTS = 1_000_000

_NULL = ("", "(null)", "None", "N/A")
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def expand(hostlist: str | None) -> tuple[str, ...]:
    """Expand a Slurm hostlist expression into node names, in Slurm's order.

    Empty input, ``None`` and Slurm's ``(null)`` give ``()``.

    >>> expand("n[1-3,5]")
    ('n1', 'n2', 'n3', 'n5')
    >>> expand("c[09-11],login")
    ('c09', 'c10', 'c11', 'login')
    >>> expand("r[1-2]n[1-2]")
    ('r1n1', 'r1n2', 'r2n1', 'r2n2')
    >>> expand("(null)")
    ()
    """
    if hostlist is None:
        return ()
    text = hostlist.strip()
    if text in _NULL:
        return ()
    names: list[str] = []
    for element in _split_top_level(text, hostlist):
        for name in _expand_element(element, hostlist):
            names.append(name)
            if len(names) > MAX_HOSTS:
                raise ValueError(f"hostlist {hostlist!r} expands to more than {MAX_HOSTS} names")
    return tuple(names)


def compress(names: Iterable[str]) -> str:
    """Compress node names into a Slurm hostlist expression (the inverse of :func:`expand`).

    Names are de-duplicated and grouped by prefix and zero-padding width;
    numbers are sorted numerically and consecutive ones become ranges. Names
    without a trailing number are kept as they are.

    >>> compress(["n3", "n1", "n2", "n10", "n5"])
    'n[1-3,5,10]'
    >>> compress(["c01", "c02", "c10", "login"])
    'c[01-02,10],login'
    >>> compress(["gpu7"])
    'gpu7'
    >>> compress([])
    ''
    """
    plain: set[str] = set()
    # prefix -> list of (number, digit string)
    numbered: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        if not name:
            continue
        match = _TRAILING_NUMBER.match(name)
        if match is None:
            plain.add(name)
        else:
            numbered.setdefault(match.group(1), []).append((int(match.group(2)), match.group(2)))

    # Group key (prefix, width); width 0 means "not zero padded".
    groups: dict[tuple[str, int], set[int]] = {}
    for prefix, entries in numbered.items():
        padded_widths = {len(d) for _, d in entries if len(d) > 1 and d.startswith("0")}
        for number, digits in entries:
            if len(digits) > 1 and digits.startswith("0"):
                width = len(digits)
            elif len(digits) in padded_widths:
                # "10" reads the same with or without padding to width 2: join c[01-10].
                width = len(digits)
            else:
                width = 0
            groups.setdefault((prefix, width), set()).add(number)

    parts: list[tuple[str, int, int, str]] = []
    for (prefix, width), numbers in groups.items():
        ordered = sorted(numbers)
        if len(ordered) == 1:
            text = f"{prefix}{_fmt(ordered[0], width)}"
        else:
            inner = ",".join(_range_text(lo, hi, width) for lo, hi in _ranges(ordered))
            text = f"{prefix}[{inner}]"
        parts.append((prefix, width, ordered[0], text))
    parts.extend((name, -1, -1, name) for name in plain)
    parts.sort(key=lambda p: (p[0], p[1], p[2]))
    return ",".join(p[3] for p in parts)


def _fmt(number: int, width: int) -> str:
    return str(number).zfill(width) if width else str(number)


def _range_text(lo: int, hi: int, width: int) -> str:
    return _fmt(lo, width) if lo == hi else f"{_fmt(lo, width)}-{_fmt(hi, width)}"


def _ranges(ordered: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in ordered:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _split_top_level(text: str, original: str) -> list[str]:
    """Split on commas (and whitespace) that are outside brackets."""
    elements: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            if depth:
                raise ValueError(f"bad hostlist {original!r}: nested '['")
            depth = 1
        elif ch == "]":
            if not depth:
                raise ValueError(f"bad hostlist {original!r}: ']' without '['")
            depth = 0
        if not depth and (ch == "," or ch.isspace()):
            if current:
                elements.append("".join(current))
            current = []
            continue
        current.append(ch)
    if depth:
        raise ValueError(f"bad hostlist {original!r}: unbalanced '['")
    if current:
        elements.append("".join(current))
    return elements


def _expand_element(element: str, original: str) -> list[str]:
    # Split "a[1-2]b[3-4]c" into literal and bracket pieces.
    pieces: list[list[str]] = []
    pos = 0
    while pos < len(element):
        start = element.find("[", pos)
        if start < 0:
            pieces.append([element[pos:]])
            break
        if start > pos:
            pieces.append([element[pos:start]])
        end = element.find("]", start)
        # _split_top_level guarantees balance; find() cannot fail here.
        pieces.append(_expand_group(element[start + 1 : end], original))
        pos = end + 1
    names = [""]
    for options in pieces:
        if len(names) * len(options) > MAX_HOSTS:
            raise ValueError(f"hostlist {original!r} expands to more than {MAX_HOSTS} names")
        names = [head + tail for head in names for tail in options]
    return names


def _expand_group(group: str, original: str) -> list[str]:
    if not group.strip():
        raise ValueError(f"bad hostlist {original!r}: empty brackets")
    out: list[str] = []
    for item in group.split(","):
        item = item.strip()
        lo_text, dash, hi_text = item.partition("-")
        if not lo_text.isdigit() or (dash and not hi_text.isdigit()):
            raise ValueError(f"bad hostlist {original!r}: bad range {item!r}")
        lo = int(lo_text)
        hi = int(hi_text) if dash else lo
        if hi < lo:
            raise ValueError(f"bad hostlist {original!r}: range {item!r} runs backwards")
        if hi - lo >= MAX_HOSTS:
            raise ValueError(f"hostlist {original!r} expands to more than {MAX_HOSTS} names")
        width = len(lo_text) if lo_text.startswith("0") and len(lo_text) > 1 else 0
        out.extend(_fmt(n, width) for n in range(lo, hi + 1))
    return out
