"""Running a sweep: one run per Dask task, rows appended to the store as runs finish.

:func:`run_one` executes one resolved run spec in the calling process (a Dask
worker): it reads the trace or cuts the slice itself (the path is on shared
storage; nothing but the spec travels through the scheduler), simulates, and
returns the result row. :func:`run_sweep` submits the runs the store does not
hold yet to a Dask cluster (a ``LocalCluster``, an existing scheduler, or
dask-jobqueue's ``SLURMCluster``) and records each result as it comes back.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import math
import os
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any

from wattsched.errors import ConfigError, MissingDependencyError
from wattsched.sim.metrics import bsld_settings

# --------------------------------------------------------------------------- one run (on a worker)

_PLATFORMS: dict[str, Any] = {}
_PREPARED: OrderedDict = OrderedDict()
_WORKLOADS: OrderedDict = OrderedDict()


def _config(spec: dict, offset_s: float = 0.0):
    """The simulation config of one run: the resolved spec's ``sim`` block on its trace.

    Its caps are the run's own (:func:`_cap_schedule`, from the caps axis or the base config); its
    energy budgets are placed relative to a slice's ``t0``.
    """
    from wattsched.config import SimConfig

    sim = dict(spec["sim"])
    if offset_s and sim.get("energy_budgets"):
        sim["energy_budgets"] = [dict(b, start_s=b["start_s"] + offset_s, end_s=b["end_s"] + offset_s)
                                 for b in sim["energy_budgets"]]
    return SimConfig.model_validate({**sim, "trace": spec["trace"]})


def _platform(config, response: dict | None):
    """The run's machine, built as every command builds it (:func:`wattsched.sim.build.build_platform`), with the
    response axis's models replacing the platform's classes."""
    from wattsched.config.platform import response_classes_of
    from wattsched.sim.build import build_platform

    key = repr((str(config.trace), config.platform, config.procs, config.cores_per_node, config.max_nodes,
                config.naive_cpu_w, response))
    p = _PLATFORMS.get(key)
    if p is None:
        p = build_platform(config)
        if response:
            from wattsched.model.response import response_from_spec

            p = copy.copy(p)
            p.response_classes = {**response_classes_of(p),
                                  **{c: response_from_spec(m) for c, m in response.items()}}
        p = _PLATFORMS[key] = p
    return p


def _augment_params(config, platform):
    """The run's augmentation, as every command chooses it (:func:`wattsched.sim.build.augment_params_of`)."""
    from wattsched.sim.build import augment_params_of

    return augment_params_of(config, platform)


def _lru_put(cache: OrderedDict, key, value, size: int = 3) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)


def _prepared_slice(spec: dict, config, platform, cache_dir: str | None):
    """The slice of ``spec``, from this process's memory, the shared cache directory, or cut now.

    Files of the cache directory are signed with the sweep's key (:mod:`wattsched.sweep.slicecache`):
    one that does not carry its signature is refused (:class:`~wattsched.sweep.slicecache.SliceCacheError`,
    the run's error), never loaded.
    """
    import json

    from wattsched.sweep import slicecache
    from wattsched.sweep.expand import run_key
    from wattsched.sweep.slicing import SliceSpec, prepare_slice

    sim = spec["sim"]
    ident = {"slice": spec["slice"], "augment": sim.get("augment"), "seed": sim["seed"],
             "platform": [sim.get("platform"), sim.get("procs"), sim.get("cores_per_node"), sim.get("max_nodes"),
                          sim.get("naive_cpu_w")],
             "response": spec.get("response")}
    key = run_key(json.loads(json.dumps(ident)))
    prep = _PREPARED.get(key)
    if prep is not None:
        _PREPARED.move_to_end(key)
        return prep
    path = Path(cache_dir) / f"slice-{key}.pkl" if cache_dir else None
    secret = slicecache.ensure_key(cache_dir) if cache_dir else b""
    if path is not None and os.path.lexists(path):  # written whole (renamed into place): signed or refused
        prep = slicecache.read_slice(path, secret)
    if prep is None:
        prep = prepare_slice(SliceSpec(**spec["slice"]), platform, _augment_params(config, platform), sim["seed"])
        if path is not None:
            slicecache.write_slice(path, prep, secret)
    _lru_put(_PREPARED, key, prep)
    return prep


def _whole_trace(config, platform):
    """The jobs of a whole trace, prepared as every command prepares them (read and augmented once per process)."""
    from wattsched.sim.build import prepare_trace
    from wattsched.sim.collector import read_whole

    key = repr((str(config.trace), config.platform, config.procs, config.cores_per_node, config.max_nodes,
                config.augment, config.seed, config.default_walltime, config.skip_bad_lines,
                sorted(platform.response_classes), config.moldable))
    jobs = _WORKLOADS.get(key)
    if jobs is None:
        jobs = read_whole(prepare_trace(config, platform).workload.jobs)  # frozen until the run that reads it
        _lru_put(_WORKLOADS, key, jobs, size=2)                              # ends; later runs freeze it again
    return jobs


def _cap_schedule(spec: dict, platform, offset_s: float):
    """The run's cap schedule: the caps axis value (in ``cap_window`` if given) and DR events, by minimum."""
    from wattsched.config import CapEntryConfig, cap_schedule_from_entries, parse_cap_value
    from wattsched.config.caps import _cap_in_watts
    from wattsched.model.constraints import CapSchedule, CapStep

    cap = spec["cap"]
    ref = spec.get("cap_reference_dyn_w")

    def watts(value) -> float:
        value = parse_cap_value(value) if not isinstance(value, float) else value
        if isinstance(value, str) and ref is not None:
            return platform.idle_power_w + float(value[:-1]) / 100.0 * ref
        return _cap_in_watts(value, platform, "caps")

    def entries_schedule(entries) -> CapSchedule:
        es = []
        for e in entries:
            e = dict(e)
            e["start_s"] += offset_s
            if e.get("end_s") is not None:
                e["end_s"] += offset_s
            if isinstance(e.get("cap_w"), str):
                e["cap_w"] = watts(e["cap_w"])
            es.append(CapEntryConfig.model_validate(e))
        return cap_schedule_from_entries(es, platform)

    if "base_cap" in spec:
        base = spec["base_cap"]
        if base.get("cap_schedule"):
            schedule = entries_schedule(base["cap_schedule"])
        else:
            schedule = CapSchedule.constant(None if base.get("cap_w") is None else watts(base["cap_w"]))
    elif isinstance(cap, dict):
        schedule = entries_schedule(cap["schedule"])
    else:
        w = math.inf if cap is None else watts(cap)
        if math.isinf(w):
            schedule = CapSchedule()
        elif spec.get("cap_window"):
            s, e = spec["cap_window"]
            schedule = CapSchedule.window(offset_s + s, offset_s + e, w)
        else:
            schedule = CapSchedule.constant(w)
    if schedule.is_uncapped and platform.budget_w is not None:  # an overprovisioned machine: its budget (as simulate)
        schedule = CapSchedule.constant(platform.budget_w)
    if spec.get("dr_events"):
        events = entries_schedule(spec["dr_events"])
        times = sorted({*schedule._starts, *events._starts})
        steps = [CapStep(t, min(schedule.cap_at(t), events.cap_at(t)), "") for t in times]
        schedule = CapSchedule(steps)
    return schedule


def _window(spec: dict, schedule, offset_s: float) -> tuple[float, float] | None:
    """Where window metrics are measured: the cap window, else the slice after its warm-up."""
    if spec.get("cap_window") and "base_cap" not in spec:  # uncapped runs too, to compare with capped ones
        s, e = spec["cap_window"]
        return (offset_s + s, offset_s + e)
    if spec.get("dr_events"):  # the first demand-response event
        first = min(spec["dr_events"], key=lambda e: e["start_s"])
        if first.get("end_s") is not None:
            return (offset_s + first["start_s"], offset_s + first["end_s"])
    from wattsched.sim.run import _cap_window

    w = _cap_window(schedule)
    if w is not None:
        return w
    sl = spec.get("slice")
    if sl is not None:
        return (sl["warmup_s"], sl["warmup_s"] + sl["length_s"])
    return None


class _Measured:
    """A result restricted to the measured jobs (warm-up jobs dropped), for :func:`summarize`."""

    def __init__(self, result, keep):
        self.jobs = {k: v[keep] for k, v in result.jobs.items()}
        self.timeline = result.timeline
        self.platform = result.platform
        self.info = result.info


def load_metric_function(ref: str):
    """``FILE.py:function`` or ``module:function`` -> the function (imported in this process)."""
    target, _, func = ref.rpartition(":")
    if target.endswith(".py"):
        name = "wattsched_sweep_metrics_" + Path(target).stem
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, target)
            if spec is None or spec.loader is None:
                raise ConfigError(f"metrics: cannot import {target!r}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            sys.path.insert(0, str(Path(target).parent))
            spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(target)
    try:
        return getattr(mod, func)
    except AttributeError:
        raise ConfigError(f"metrics: {target!r} has no function {func!r}") from None


def run_one(spec: dict, cache_dir: str | None = None, tables_dir: str | None = None) -> dict:
    """Simulate one resolved run spec here and return its result row (summary metrics and facts).

    Raises whatever the run raises; :func:`run_task` turns that into an error row. The workers' cached
    traces, and what else is alive, are kept out of the collector's passes while it runs.
    """
    from wattsched.sim.collector import frozen

    with frozen():
        return _run_one(spec, cache_dir, tables_dir)


def _run_one(spec: dict, cache_dir: str | None, tables_dir: str | None = None) -> dict:
    import numpy as np

    from wattsched.sim.build import build_run
    from wattsched.sim.metrics import summarize

    sim = spec["sim"]
    sl = spec.get("slice")
    offset = sl["warmup_s"] if sl is not None else 0.0
    config = _config(spec, offset)
    platform = _platform(config, spec.get("response"))
    prep = None
    predictor = None
    if sl is not None:
        prep = _prepared_slice(spec, config, platform, cache_dir)
        jobs = prep.jobs
        if config.moldable is not None:  # the slice is shared by the cells; each run makes its own jobs moldable
            from wattsched.workload.moldable import moldable

            jobs = list(moldable(jobs, config.moldable, config.seed))
        if config.predictor == "history" and prep.history is not None:
            if config.predictor_params:
                raise ConfigError("slices.prime_history primes the history predictor with its default parameters; "
                                  "drop predictor params or prime_history")
            predictor = copy.deepcopy(prep.history)
    else:
        jobs = _whole_trace(config, platform)
    cap = _cap_schedule(spec, platform, offset)
    run = build_run(config, platform=platform, jobs=jobs, cap=cap, predictor=predictor)
    t = time.perf_counter()
    result = run.engine().run()
    if tables_dir is not None:  # the run's tables, as `wattsched simulate` writes them
        from wattsched.sim.report import write_tables

        os.makedirs(tables_dir, exist_ok=True)
        write_tables(result, Path(tables_dir))
    wall = time.perf_counter() - t
    window = _window(spec, cap, offset)
    measured = result
    if sl is not None and sl["warmup_s"] > 0:
        measured = _Measured(result, np.asarray(result.jobs["submit_s"]) >= sl["warmup_s"])
    definition, threshold_s = bsld_settings(sim.get("policy", "easy"), sim.get("bsld_definition"),
                                           sim.get("bsld_threshold_s"))
    summary = summarize(measured, bsld_threshold_s=threshold_s, window=window, bsld_definition=definition)
    row: dict[str, Any] = {
        "status": "ok",
        "sim_wall_s": round(wall, 3),
        "cap_w": None if window is None else _finite(cap.cap_at(window[0])),
        "window_start_s": None if window is None else window[0],
        "window_end_s": None if window is None else window[1],
        "idle_w": platform.idle_power_w,
        "machine": run.machine,
        "plans_rejected": result.info.get("plans_rejected", 0),
        "policy_calls": result.info.get("policy_calls"),
        **summary,
    }
    if prep is not None:
        row.update({f"slice_{k}": v for k, v in prep.info.items() if k not in ("slice", "seed")})
    if window is not None:
        row["window_power_w"] = window_power(result, window)
    for ref in spec.get("metrics") or []:
        extra = load_metric_function(ref)(result, {"spec": spec, "window": window, "platform": platform,
                                                   "slice": prep})
        row.update(extra or {})
    return row


def window_power(result, window: tuple[float, float], step_s: float = 60.0) -> list[float]:
    """Platform power on a ``step_s`` grid over the window (the value at each step's middle)."""
    import numpy as np

    ws, we = window
    if not math.isfinite(we):
        we = float(result.timeline["t_s"][-1])
    tl_t, tl_p = result.timeline["t_s"], result.timeline["power_w"]
    if len(tl_t) == 0:
        return []
    grid = np.arange(ws + step_s / 2, we, step_s)
    idx = np.clip(np.searchsorted(tl_t, grid, side="right") - 1, 0, len(tl_t) - 1)
    return [round(float(p), 1) for p in tl_p[idx]]


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def run_task(key: str, spec: dict, cache_dir: str | None = None, tables_dir: str | None = None) -> dict:
    """:func:`run_one` as a Dask task: never raises; a failure becomes a row with ``status: failed``."""
    t = time.perf_counter()
    try:
        row = run_one(spec, cache_dir, tables_dir)
    except Exception as exc:  # recorded in the store; the sweep goes on
        row = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc(limit=8)}
    row["run_wall_s"] = round(time.perf_counter() - t, 3)
    row["key"] = key
    return row


# --------------------------------------------------------------------------- the campaign (client side)


SCHEDULER_TIMEOUT_S = 10.0
"""How long ``--scheduler ADDRESS`` may take to answer before the sweep gives up (Dask's default is 30 s)."""

SCHEDULER_PROTOCOLS = ("tcp", "tls", "inproc", "ucx", "ws", "wss")


def check_scheduler_address(address: str) -> str:
    """``address`` if it has the form of a Dask scheduler address (``[tcp://]host:port``), else an OptionError.

    Checked before anything is expanded or connected, so that a typo is one line at once.

    >>> check_scheduler_address("tcp://127.0.0.1:8786")
    'tcp://127.0.0.1:8786'
    >>> check_scheduler_address("not a url at all")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    wattsched.errors.OptionError: --scheduler: 'not a url at all' is not a scheduler address; expected tcp://...
    """
    from urllib.parse import urlsplit

    from wattsched.errors import OptionError

    def bad(why: str = "") -> OptionError:
        return OptionError("--scheduler", f"{address!r} is not a scheduler address{why}; expected tcp://HOST:PORT, "
                           "e.g. tcp://127.0.0.1:8786")

    scheme, sep, _ = address.partition("://")
    if not sep:
        scheme = "tcp"
    elif scheme not in SCHEDULER_PROTOCOLS:
        raise bad(f" (unknown protocol {scheme!r}; Dask knows {', '.join(SCHEDULER_PROTOCOLS)})")
    if scheme == "inproc":
        return address
    try:
        parts = urlsplit(address if sep else f"tcp://{address}")
        port = parts.port
    except ValueError:
        raise bad(" (the port is not a number from 1 to 65535)") from None
    if not parts.hostname or any(c.isspace() for c in address) or parts.path not in ("", "/") or parts.query:
        raise bad()
    if not port:
        raise bad(" (no port)")
    return address


def make_cluster(cluster_cfg, *, workers: int | None = None, scheduler: str | None = None, log_dir: Path):
    """A Dask client on the configured cluster; returns ``(client, cluster_or_None)``.

    A Dask scheduler runs whatever code its clients send, so the clusters made here speak TLS with mutual
    authentication (``distributed.security.Security``): only a peer holding the cluster's certificate and key
    can connect. A site's own certificates come from Dask's configuration (``distributed.comm.tls.*`` with
    ``distributed.comm.require-encryption: true``); otherwise a self-signed pair is made for this campaign
    (``Security.temporary()``): in memory for a ``LocalCluster``, and for ``SLURMCluster`` written, mode 0600,
    under ``log_dir`` (shared storage the worker jobs read, like their logs) for as long as the cluster lives.
    An existing ``scheduler`` is reached with the security of Dask's configuration.
    """
    from wattsched.sweep import require_dask

    distributed = require_dask()
    import logging

    from distributed.security import Security

    def security():
        site = Security()  # what Dask's configuration gives (a site's certificates), else nothing
        return site if site.require_encryption else Security.temporary()

    quiet = logging.getLogger("wattsched").getEffectiveLevel() > logging.INFO
    if quiet:  # Dask logs every worker start and stop at INFO
        for name in ("distributed", "dask_jobqueue"):
            logging.getLogger(name).setLevel(logging.WARNING)
    if scheduler:
        from wattsched.errors import OptionError

        check_scheduler_address(scheduler)
        try:
            return distributed.Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT_S:g}s", security=Security()), None
        except (OSError, TimeoutError, ValueError) as exc:  # nothing listening, refused, an address Dask rejects
            why = " ".join(str(exc).split()) or type(exc).__name__
            raise OptionError("--scheduler", f"cannot reach the Dask scheduler at {scheduler} within "
                              f"{SCHEDULER_TIMEOUT_S:g} s: {why}") from None
    if cluster_cfg.kind == "slurm":
        try:
            from dask_jobqueue import SLURMCluster
        except ImportError:
            from wattsched.sweep import INSTALL_HINT

            raise MissingDependencyError(f"cluster: {{kind: slurm}} needs dask-jobqueue: {INSTALL_HINT}") from None
        log_dir.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {
            "cores": cluster_cfg.cores,
            "processes": cluster_cfg.cores,
            "memory": cluster_cfg.memory,
            "walltime": cluster_cfg.walltime,
            "queue": cluster_cfg.queue,
            "account": cluster_cfg.account,
            "python": cluster_cfg.python or sys.executable,
            "job_extra_directives": list(cluster_cfg.job_extra_directives),
            "log_directory": str(log_dir),
            "local_directory": cluster_cfg.local_directory,
            "worker_extra_args": ["--nthreads", "1"],
        }
        # the scheduler and its HTTP endpoint listen only where asked (never on every interface)
        host = cluster_cfg.scheduler_host
        kwargs["scheduler_options"] = {"dashboard_address": f"{host or '127.0.0.1'}:0",
                                       **({"host": host} if host else {})}
        kwargs["security"] = security()
        # "tls", not "tls://": the workers get it as --protocol, and only the bare name makes a worker listen on
        # the address that reaches the scheduler (distributed's Worker compares it with "tls"; "tls://" left
        # them on 127.0.0.1, unreachable from the scheduler's host)
        kwargs["protocol"] = "tls"
        kwargs["shared_temp_directory"] = str(log_dir)
        cluster = SLURMCluster(**{k: v for k, v in kwargs.items() if v is not None})
        cluster.scale(jobs=workers or cluster_cfg.workers or 1)
        return distributed.Client(cluster, security=cluster.security), cluster
    n = workers or cluster_cfg.workers or os.cpu_count() or 1
    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                       dashboard_address=None, local_directory=cluster_cfg.local_directory,
                                       silence_logs=logging.WARNING if quiet else False, security=security(),
                                       protocol="tls://")
    return distributed.Client(cluster, security=cluster.security), cluster


def run_sweep(cfg, runs, store, *, workers: int | None = None, scheduler: str | None = None,
              progress: bool = True, max_runs: int | None = None, log=print) -> dict:
    """Execute the runs the store lacks; append each finished row at once. Returns counts.

    Rows of runs that are no longer in the sweep stay in the store but are not
    reported (:meth:`Store.rows` filters by the current keys).
    """
    from tqdm import tqdm

    done = store.finished_keys()
    todo = [r for r in runs if r.key not in done]
    # runs of one slice one after the other: a worker cuts a slice once and keeps the last few in memory
    todo.sort(key=lambda r: (r.spec["trace"], (r.spec.get("slice") or {}).get("index", -1)))
    if max_runs is not None:
        todo = todo[:max_runs]
    counts = {"runs": len(runs), "skipped": len(runs) - len([r for r in runs if r.key not in done]),
              "executed": 0, "failed": 0}
    if not todo:
        return counts
    client, cluster = make_cluster(cfg.cluster, workers=workers, scheduler=scheduler,
                                   log_dir=store.dir / "dask-logs")
    bar = tqdm(total=len(todo), desc="runs", unit="run", disable=not progress, dynamic_ncols=True,
               postfix={"failed": 0})
    try:
        from distributed import as_completed

        cache_dir = str(store.dir / ".slices")
        from wattsched.sweep.slicecache import ensure_key

        ensure_key(cache_dir)  # the sweep's key for the slices its workers share (0600, made before they start)
        tables = store.dir / "runs" if cfg.run_tables else None
        futures = [client.submit(run_task, r.key, r.spec, cache_dir, None if tables is None else str(tables / r.key),
                                 key=f"run-{r.key}", pure=False)
                   for r in todo]
        by_key = {r.key: r for r in todo}
        for fut in as_completed(futures):
            try:
                row = fut.result()
            except Exception as exc:  # the worker died (killed job, lost node): recorded, not fatal
                key = fut.key.split("-", 1)[1] if isinstance(fut.key, str) else str(fut.key)
                row = {"key": key, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            store.add(row["key"], by_key[row["key"]].axes, row)
            counts["executed"] += 1
            if row["status"] != "ok":
                counts["failed"] += 1
                bar.set_postfix(failed=counts["failed"])
                if counts["failed"] <= 3:
                    log(f"run {row['key']} {by_key[row['key']].axes} failed: {row.get('error')}")
            bar.update(1)
            fut.release()
    finally:
        bar.close()
        client.close()
        if cluster is not None:
            cluster.close()
    return counts
