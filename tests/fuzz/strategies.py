"""Hypothesis strategies shared by the fuzz tests: text that looks almost like what the readers expect."""

from __future__ import annotations

from hypothesis import strategies as st

NUMBERS = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.integers().map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["-1", "0", "1", "nan", "inf", "-inf", "1e300", "1e999", "9" * 400, "0x10", "1_000", "", " "]),
)
TOKENS = st.one_of(NUMBERS, st.text(max_size=8), st.sampled_from([";", "#", ",", "\t", "\ufeff", "\x00", "é"]))

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@st.composite
def swf_text(draw) -> str:
    """A header and job lines: mostly 18 numeric fields, sometimes damaged."""
    lines = []
    for key in draw(st.lists(st.sampled_from(["MaxProcs", "MaxNodes", "UnixStartTime", "MaxJobs", "Note"]),
                             max_size=3)):
        lines.append(f"; {key}: {draw(NUMBERS)}")
    for _ in range(draw(st.integers(0, 12))):
        n = draw(st.sampled_from([18, 18, 18, 17, 19, 0, 3]))
        fields = [draw(st.one_of(st.integers(-2, 50).map(str), TOKENS)) for _ in range(n)]
        lines.append(" ".join(fields))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


TABLE_COLUMNS = ["id", "submit_s", "runtime_s", "walltime_s", "procs", "nodes", "user", "status", "mean_w", "max_w",
                 "std_w", "power_series", "min_nodes", "max_nodes", "malleable", "gpus_per_node", "submit_time",
                 "time_limit", "job_state", "num_gpus", "extra"]


@st.composite
def table_text(draw) -> str:
    columns = draw(st.lists(st.sampled_from(TABLE_COLUMNS), min_size=1, max_size=8))
    rows = [",".join(columns)]
    for _ in range(draw(st.integers(0, 8))):
        cells = [draw(st.one_of(st.integers(-2, 100).map(str), NUMBERS, st.text(max_size=6),
                                st.sampled_from(["0:350;600:420", "COMPLETED", "true", "2026-01-01T00:00:00"])))
                 for _ in range(draw(st.sampled_from([len(columns), len(columns), len(columns) + 1])))]
        rows.append(",".join(f'"{c}"' if "," in c or '"' in c else c for c in cells))
    return "\n".join(rows) + "\n"


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
                    st.sampled_from(["60%", "120%", "inf", "-5", "runtime", "easy", "default", "t.swf"]))
VALUES = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                      max_leaves=10)
