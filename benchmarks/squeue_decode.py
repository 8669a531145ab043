"""Decoding a big ``squeue --json``: json.loads, orjson, msgspec, and the daemon's decoder, per Slurm JSON shape.

Usage: python benchmarks/squeue_decode.py [--jobs 100000] [--running 8000] [--shape 22.05 --shape 25.11]
                                          [--repeat 3]

The document is built from the job records of tests/fixtures/slurm (22.05: the
live capture v0.0.38-live; 23.02: v0.0.39; 25.11: v0.0.44), replicated to
``--jobs`` jobs of which ``--running`` run (each with its per-node core map) and
the rest are pending, every job with its own id, name, user and submit time.
Each figure is the best of ``--repeat`` runs, wall-clock and CPU time (the
latter is what other work on a shared machine does not inflate), with the
garbage collector as the daemon has it (on, except where the decoder pauses it).

Rows:

- ``json.loads``: the standard library, dicts for every key of every job.
- ``json.loads + number hooks``: as wattsched's general path calls it (NaN,
  Infinity and over-long integers refused by Python callbacks).
- ``orjson.loads`` / ``msgspec.json.decode``: the same dicts, from C decoders
  (a row is left out when the package is not installed).
- ``msgspec typed (keys read)``: msgspec into the decoder's records, which name
  only the ~35 keys the daemon reads; the other ~100 per job are skipped.
- ``general path``: json.loads + number hooks + ``_job_from_json`` per job, the
  decoder wattsched had before (``parse._squeue_general``).
- ``decode_squeue_json``: the daemon's decoder (msgspec typed + fast conversion,
  collector paused), from bytes as slurmrestd sends them and from text as
  ``squeue`` prints it; ``+ previous decode's jobs``: the same document again
  with the backends' cache of the last decode, as in a cycle where no job
  changed.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import time
from pathlib import Path

from wattsched.daemon.slurm import parse

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "slurm"
SHAPES = {"22.05": "v0.0.38-live", "23.02": "v0.0.39", "25.11": "v0.0.44"}


def _set(job: dict, key: str, value: int) -> None:
    """A number in the job's own encoding (plain, or ``{set, infinite, number}``)."""
    if isinstance(job.get(key), dict):
        job[key] = {"set": True, "infinite": False, "number": value}
    else:
        job[key] = value


def squeue_document(shape: str, jobs: int, running: int, now: int = 1_795_305_600) -> bytes:
    doc = json.loads((FIXTURES / SHAPES[shape] / "squeue.json").read_text())
    states = [j["job_state"] if isinstance(j["job_state"], str) else j["job_state"][0] for j in doc["jobs"]]
    run_tpl = doc["jobs"][states.index("RUNNING")]
    pending_tpls = [j for j, s in zip(doc["jobs"], states, strict=True) if s == "PENDING"]
    out = []
    for i in range(jobs):
        tpl = run_tpl if i < running else pending_tpls[i % len(pending_tpls)]
        j = copy.deepcopy(tpl)
        j["job_id"] = i + 1
        j["name"] = f"job-{i}"
        j["user_name"] = f"u{i % 500}"
        _set(j, "submit_time", now - 3600 + i // 50)
        out.append(j)
    doc["jobs"] = out
    return json.dumps(doc).encode()


def best(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds of ``repeat`` runs (CPU time is what a shared machine
    does not inflate)."""
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        del result
        gc.collect()
    return min(walls), min(cpus)


def run_shape(shape: str, args: argparse.Namespace) -> None:
    import msgspec

    try:
        import orjson
    except ImportError:
        orjson = None
    data = squeue_document(shape, args.jobs, args.running)
    text = data.decode()
    print(f"Slurm {shape} squeue --json ({SHAPES[shape]}): {args.jobs:,} jobs ({args.running:,} running), "
          f"{len(data) / 1e6:.0f} MB, {len(data) / args.jobs / 1e3:.2f} kB per job, "
          f"{len(json.loads(text)['jobs'][-1])} keys per pending job, {len(parse._JOB_KEYS) + 1} read")
    rows = []
    if not args.skip_slow:
        rows.append(("json.loads", lambda: json.loads(text)))
        rows.append(("json.loads + number hooks", lambda: parse._load_json(text, "squeue --json")))
    if orjson is not None:
        rows.append(("orjson.loads", lambda: orjson.loads(data)))
    rows.append(("msgspec.json.decode (dicts)", lambda: msgspec.json.decode(data)))
    rows.append(("msgspec typed (keys read)", lambda: parse._SQUEUE_DECODER.decode(data)))
    if not args.skip_slow:
        rows.append(("general path (before)", lambda: parse._squeue_general(text, "squeue --json", False)))
    rows.append(("decode_squeue_json (bytes)", lambda: parse.decode_squeue_json(data)))
    rows.append(("decode_squeue_json (text)", lambda: parse.decode_squeue_json(text)))
    cache: dict = {}
    parse.decode_squeue_json(data, cache=cache)
    rows.append(("  + previous decode's jobs", lambda: parse.decode_squeue_json(data, cache=cache)))
    print(f"  {'decoder':<32} {'wall s':>8} {'CPU s':>8} {'CPU us/job':>10}")
    for name, fn in rows:
        wall, cpu = best(fn, args.repeat)
        print(f"  {name:<32} {wall:8.3f} {cpu:8.3f} {cpu / args.jobs * 1e6:10.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--running", type=int, default=8_000)
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="repeatable; default 22.05 and 25.11")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-slow", action="store_true", help="leave out json.loads rows and the general path")
    args = ap.parse_args()
    for shape in args.shape or ["22.05", "25.11"]:
        run_shape(shape, args)
        gc.collect()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
