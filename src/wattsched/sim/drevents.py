"""Demand-response event files for replay, and a generator of random events (Ahmed et al. 2017, §V-C).

A file of events is YAML (a list of entries, or a mapping with a
``demand_response:`` list) or CSV with the header
``notice_s,start_s,end_s,cap_w,reduction_w,label`` (``notice_s``,
``reduction_w``/``cap_w`` and ``label`` optional). Each entry is a
``demand_response`` entry of the simulation config (docs/config.md). Errors
name the file, the line and the key: ``events.csv:3: end_s: must be after
start_s (600 s), got 300``.

:func:`generate_events` draws events covering a given share of a time span
at random (seeded) times, as in the paper's experiments.
"""

from __future__ import annotations

import csv
import io
import math
import random
from pathlib import Path
from typing import TYPE_CHECKING

from wattsched.errors import ConfigError, read_config_text

if TYPE_CHECKING:
    from wattsched.config import DemandResponseEventConfig

# The config models (and pydantic, numpy behind them) are imported where an event is checked, not here:
# every command's parser reads MAX_EVENTS, and `wattsched simulate` starts its plot worker only after that.

CSV_COLUMNS = ("notice_s", "start_s", "end_s", "cap_w", "reduction_w", "label")
MAX_EVENTS = 100_000
"""Default bound of ``dr-events generate --events`` (``--max-events`` raises it)."""


def load_dr_events(path: str | Path) -> list[DemandResponseEventConfig]:
    """Read and validate a file of demand-response events (YAML or CSV)."""
    path = Path(path)
    label = str(path)
    if not path.exists():
        raise ConfigError(f"{label}: no such file")
    if path.suffix.lower() == ".csv":
        return _load_csv(path, label)
    from wattsched.config import read_yaml

    raw, lines = read_yaml(path, label=label)
    prefix: tuple = ()
    if isinstance(raw, dict) and "demand_response" in raw:
        extra = sorted(set(raw) - {"demand_response"})
        if extra:
            line = lines.get((extra[0],))
            raise ConfigError(f"{label}:{line}: {extra[0]}: unknown key (expected demand_response)")
        raw, prefix = raw["demand_response"], ("demand_response",)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{label}:1: demand_response: expected a list of events")
    out = []
    for i, entry in enumerate(raw):
        line = lines.get((*prefix, i), 1)
        if not isinstance(entry, dict):
            raise ConfigError(f"{label}:{line}: [{i}]: expected a mapping of notice_s, start_s, end_s, cap_w ...")
        event, (loc, msg) = _event(entry)
        if event is None:
            key = ".".join(str(k) for k in loc) or "entry"
            kline = lines.get((*prefix, i, loc[0]), line) if loc else line
            raise ConfigError(f"{label}:{kline}: {key}: {msg}")
        out.append(event)
    return out


def _event(entry: dict) -> tuple[DemandResponseEventConfig | None, tuple]:
    """``entry`` as an event and ``((), "")``, or ``None`` and the first thing wrong with it as ``(loc, message)``."""
    from pydantic import ValidationError

    from wattsched.config import DemandResponseEventConfig, error_items

    try:
        return DemandResponseEventConfig.model_validate(entry), ((), "")
    except ValidationError as e:
        return None, next(iter(error_items(e, entry, DemandResponseEventConfig)))


def _load_csv(path: Path, label: str) -> list[DemandResponseEventConfig]:
    text = read_config_text(path, label)
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    out = []
    for cells in reader:
        if not cells or not any(c.strip() for c in cells) or cells[0].lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in cells]
        line = reader.line_num
        if header is None:
            unknown = [c for c in cells if c not in CSV_COLUMNS]
            if unknown:
                raise ConfigError(f"{label}:{line}: {unknown[0]}: unknown column (columns: {', '.join(CSV_COLUMNS)})")
            for need in ("start_s", "end_s"):
                if need not in cells:
                    raise ConfigError(f"{label}:{line}: {need}: missing column")
            header = cells
            continue
        if len(cells) != len(header):
            raise ConfigError(f"{label}:{line}: {header[min(len(cells), len(header) - 1)]}: expected "
                              f"{len(header)} columns, got {len(cells)}")
        entry = {k: v for k, v in zip(header, cells, strict=True) if v != ""}
        event, (loc, msg) = _event(entry)
        if event is None:
            key = ".".join(str(k) for k in loc) or "entry"
            raise ConfigError(f"{label}:{line}: {key}: {msg}")
        out.append(event)
    if header is None:
        raise ConfigError(f"{label}: empty; expected a header such as notice_s,start_s,end_s,cap_w")
    return out


def generate_events(span_s: float, ratio: float, *, events: int = 1, notice_s: float = 0.0,
                    cap: str | float = "80%", start_s: float = 0.0, seed: int = 0,
                    max_events: int | None = MAX_EVENTS) -> list[dict]:
    """Events covering ``ratio`` of ``[start_s, start_s + span_s)``, at random non-overlapping times (seeded).

    Each of the ``events`` events lasts ``ratio · span_s / events``; each is
    announced ``notice_s`` before it starts (not before ``start_s``). The
    result is a list of ``demand_response`` entries, each checked by the
    rules the event-file reader applies (a negative notice, a cap of 0 are
    refused here, naming the option). More than ``max_events`` events
    (:data:`MAX_EVENTS` unless raised) are refused.

    >>> evs = generate_events(1000.0, 0.25, events=2, notice_s=50, seed=1)
    >>> sum(e["end_s"] - e["start_s"] for e in evs)
    250.0
    >>> all(e["notice_s"] == max(0.0, round(e["start_s"] - 50, 3)) for e in evs)
    True
    """
    if not 0 < ratio <= 1:
        raise ConfigError(f"--ratio: must be in (0, 1], got {ratio}")
    if events < 1:
        raise ConfigError(f"--events: must be at least 1, got {events}")
    if max_events is not None and events > max_events:
        raise ConfigError(f"--events: {events:,} events is above the limit of {max_events:,}; raise it with "
                          "--max-events N if you mean it")
    if not (span_s > 0 and math.isfinite(span_s)):
        raise ConfigError(f"--span: must be a positive finite number of seconds, got {span_s}")
    rng = random.Random(seed)
    length = ratio * span_s / events
    free = span_s - ratio * span_s
    # the gaps before, between and after the events: a random split of the free time
    cuts = sorted(rng.uniform(0.0, free) for _ in range(events))
    out = []
    t = start_s
    prev = 0.0
    for i, c in enumerate(cuts):
        t += c - prev
        prev = c
        s, e = round(t, 3), round(t + length, 3)
        out.append({"notice_s": max(start_s, round(s - notice_s, 3)), "start_s": s, "end_s": e, "cap_w": cap,
                    "label": f"dr-{i + 1}"})
        t += length
    for entry in out:
        _check_generated(entry, events)
    return out


_OPTION_OF = {"notice_s": "--notice", "cap_w": "--cap", "start_s": "--span", "end_s": "--events"}


def _check_generated(entry: dict, events: int) -> None:
    """Refuse options whose events the event-file reader would refuse, by the reader's own rules."""
    event, (loc, msg) = _event(entry)
    if event is None:
        key = str(loc[0]) if loc else "entry"
        option = _OPTION_OF.get(key, "--span")
        if key == "end_s":
            msg = f"{events:,} events would each last {entry['end_s'] - entry['start_s']:g} s (times are kept " \
                  f"to the millisecond): {msg}"
        raise ConfigError(f"{option}: the events would be refused when read back ({key}: {msg})")
