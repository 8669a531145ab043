"""The slurmrestd backend: the daemon reaches Slurm over its REST API, from any host.

For sites where the daemon does not run on the head node. Every request goes
through :meth:`SlurmREST.request`, the one place that speaks HTTP: it has a
time limit, retries with exponential backoff what is transient (no connection,
a time-out, HTTP 502/503/504, slurmctld unreachable behind slurmrestd) and
raises everything else at once as a :class:`SlurmRESTError` naming the method,
URL, HTTP status and Slurm's own error text.

Authentication is JWT (``AuthAltTypes=auth/jwt``): the token, from
``scontrol token``, is read from a file that must be a regular file owned by
the user running wattsched with mode 0600 or 0400, re-read when it changes (so
a rotated token is picked up), sent in ``X-SLURM-USER-TOKEN`` with
``X-SLURM-USER-NAME`` (Slurm 22.05 requires both), and never logged or put in
an error message. Redirects are not followed (``urllib`` would send the token
along to the new address); ``http://`` to a host other than loopback is refused
by the config unless ``slurm.allow_insecure_http: true``.

What each REST version can do (REFERENCE-slurm-power.md §1.1, §3; checked
against Slurm 22.05.8's slurmrestd):

- Reading works on every version: ``GET /slurm/vX/jobs`` and ``/nodes`` carry
  the same JSON as ``squeue --json`` and (from v0.0.39) ``scontrol show nodes
  --json``, so the version-aware parsers of :mod:`parse` read them.
- v0.0.38 (Slurm 22.05) updates a job with ``hold``, ``priority`` and
  ``comment`` only: it refuses ``required_nodes`` and ``excluded_nodes``
  ("Disabled key") and has no ``admin_comment``, so it can neither pin a job
  nor mark a hold as wattsched's; nodes are read-only. Those operations raise
  :class:`SlurmRESTError` saying so; use the ``cli`` backend on the head node.
- v0.0.39+ (23.02+) updates ``hold``, ``required_nodes`` and
  ``admin_comment`` on ``POST /job/{id}`` and node states on
  ``POST /node/{name}``.
- Requeue has a REST endpoint only from v0.0.45 (Slurm 26.05,
  ``POST /job/{id}/requeue``); before that :meth:`SlurmREST.requeue` raises.

Reading only what changed: ``GET /slurm/vX/jobs?update_time=T`` is all or
nothing on every version (slurmctld's ``_slurm_rpc_dump_jobs``,
src/slurmctld/proc_req.c, 22.05 to 25.05): if no job changed since ``T``
(slurmctld's ``last_job_update``) the reply carries no jobs, as HTTP 304 Not
Modified (22.05, src/slurmrestd/operations.c) or a warning "No job changes
since update_time" (23.02 on); otherwise it carries every job. There is no
delta to merge and deleted jobs cannot go missing: the backend keeps the last
full job set and reuses it when Slurm says nothing changed. ``T`` is the
``last_update`` of the previous reply where Slurm gives one (data_parser
v0.0.40 on: slurmctld's own clock), else the time of the previous request on
this host minus ``clock_margin_s`` (so a clock ahead of slurmctld's by less
than that cannot hide a change). Every ``full_read_every``-th read asks without
``update_time`` all the same, bounding what a change Slurm does not signal
could hide. Nodes are read in full every cycle (10,000 nodes are 1/50 of
100,000 jobs).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from wattsched.daemon.nofollow import build_opener, redirect_message
from wattsched.daemon.slurm import parse
from wattsched.daemon.slurm.backend import WallClock
from wattsched.daemon.slurm.cli import TRANSIENT
from wattsched.daemon.slurm.records import ClusterState
from wattsched.errors import ConfigError, SlurmCommandError

log = logging.getLogger(__name__)

VERSIONS = tuple(f"0.0.{n}" for n in range(45, 37, -1))
"""REST API versions this backend speaks, newest first (Slurm 26.05 down to 22.05)."""

TRANSIENT_STATUS = frozenset({502, 503, 504})
"""HTTP statuses worth a retry: slurmrestd behind a proxy restarting or overloaded."""

MAX_BODY = 1024 * 1024 * 1024
"""Largest response read (bytes): 100,000 jobs are some 250 MB in 22.05's JSON and 550 MB in 25.11's."""


class SlurmRESTError(SlurmCommandError):
    """A slurmrestd request failed: method, URL, HTTP status (-1 without one) and Slurm's error text."""

    def __init__(self, method: str, url: str, status: int, message: str, body: str = ""):
        super().__init__([method, url], status, body, message)
        self.method, self.url, self.status = method, url, status
        where = f"HTTP {status}" if status >= 0 else "no response"
        self.args = (f"{method} {url}: {where}: {message}",)

    def __str__(self) -> str:
        return self.args[0]


def read_token(path: str | os.PathLike) -> str:
    """The JWT in ``path``, checked like a credentials file.

    The file holds the token alone or the ``SLURM_JWT=...`` line ``scontrol
    token`` prints. It must be a regular file owned by the user running
    wattsched, mode 0600 or 0400.

    Raises
    ------
    ConfigError
        Naming the file and what to do; never the token.
    """
    label = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"{label}: no such file (slurm.token_file, the slurmrestd token)") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot open the slurmrestd token file: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{label}: not a regular file; the slurmrestd token must be a regular file of mode 0600")
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != os.geteuid():
            raise ConfigError(
                f"{label}: owned by uid {st.st_uid}, not by the user running wattsched (uid {os.geteuid()}); "
                "the slurmrestd token file must belong to that user: chown it and chmod 600 it"
            )
        if mode not in (0o600, 0o400):
            raise ConfigError(
                f"{label}: mode {mode:04o} is not allowed for the slurmrestd token file: it must be 0600 or 0400 "
                f"(readable by its owner only); run `chmod 600 {label}`"
            )
        data = os.read(fd, 65536)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read the slurmrestd token file: {exc.strerror}") from None
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace").strip()
    if text.startswith("SLURM_JWT="):
        text = text.removeprefix("SLURM_JWT=").strip()
    if not text or any(c.isspace() for c in text):
        raise ConfigError(f"{label}: expected one JWT (the output of `scontrol token`), found "
                          + ("nothing" if not text else "several words"))
    return text


class SlurmREST(WallClock):
    """Talks to slurmrestd.

    Parameters
    ----------
    url
        slurmrestd's base URL, e.g. ``http://slurmrestd:6820``.
    token_file
        File holding the JWT (see :func:`read_token`).
    user
        Sent as ``X-SLURM-USER-NAME``: the user the token was made for.
    api_version
        ``auto`` (the newest version the server answers, probed with ``/ping``)
        or one of :data:`VERSIONS` such as ``"0.0.38"``.
    opener
        ``urllib.request.OpenerDirector``-like object with ``open(request,
        timeout=)``; tests pass their own. Default: a plain opener that ignores
        proxy variables (slurmrestd is on the site's own network) and follows
        no redirect (:mod:`wattsched.daemon.nofollow`).
    full_read_every
        Every this many job reads, one asks without ``update_time`` (1: always).
    clock_margin_s
        Subtracted from this host's clock when Slurm's reply gives no
        ``last_update`` to ask ``update_time`` from (v0.0.38, v0.0.39).
    """

    name = "rest"

    def __init__(
        self,
        url: str,
        token_file: str | os.PathLike,
        user: str = "root",
        api_version: str = "auto",
        timeout_s: float = 30.0,
        retries: int = 2,
        retry_backoff_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        opener=None,
        full_read_every: int = 10,
        clock_margin_s: float = 5.0,
    ):
        if api_version != "auto" and api_version not in VERSIONS:
            raise ValueError(f"api_version must be auto or one of {', '.join(VERSIONS)}, not {api_version!r}")
        self.url = url.rstrip("/")
        self.token_file = Path(token_file)
        self.user = user
        self.api_version = None if api_version == "auto" else api_version
        self.timeout_s = timeout_s
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self._sleep = sleep
        self._opener = opener or build_opener()
        self._token: tuple[tuple[int, int, int], str] | None = None
        self.requests_made = 0
        if full_read_every < 1:
            raise ValueError(f"full_read_every must be at least 1, not {full_read_every!r}")
        self.full_read_every = full_read_every
        self.clock_margin_s = clock_margin_s
        self._jobs: parse.Decoded | None = None  # the last full job set
        self._jobs_since: float | None = None  # update_time for the next read
        self._reads_since_full = 0
        self.jobs_reused = 0  # reads Slurm answered "no change" to
        self._job_cache: dict = {}  # records of the last read, reused where unchanged (parse.decode_squeue_json)

    def __repr__(self) -> str:
        return f"SlurmREST(url={self.url!r}, token_file={str(self.token_file)!r}, api_version={self.api_version!r})"

    # ------------------------------------------------------------------ HTTP

    def _token_value(self) -> str:
        try:
            st = os.stat(self.token_file)
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        if self._token is None or key is None or self._token[0] != key:
            token = read_token(self.token_file)
            self._token = (key, token) if key is not None else None
            return token
        return self._token[1]

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, *, retry: bool = True,
                raw: bool = False) -> Any:
        """Send one request and return the response body; raise :class:`SlurmRESTError` on failure.

        The body is text, or the bytes as received with ``raw=True`` (what the
        JSON decoders read fastest).

        Retries (with exponential backoff from ``retry_backoff_s``) only what
        is transient: no connection, a time-out, HTTP 502/503/504, or a Slurm
        error saying slurmctld cannot be reached. Everything else is raised at
        once with Slurm's error text.
        """
        url = f"{self.url}{path}"
        data = None if body is None else json.dumps(body).encode()
        attempts = 1 + (self.retries if retry else 0)
        delay = self.retry_backoff_s
        for attempt in range(1, attempts + 1):
            self.requests_made += 1
            headers = {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token_value(),
                       "Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with self._opener.open(req, timeout=self.timeout_s) as resp:
                    data_in = resp.read(MAX_BODY + 1)
                    status = resp.status
                if len(data_in) > MAX_BODY:
                    raise SlurmRESTError(method, url, status, f"response larger than {MAX_BODY} bytes")
                errors = _slurm_errors(data_in)
                if not errors:
                    return data_in if raw else data_in.decode("utf-8", errors="replace")
                text = data_in.decode("utf-8", errors="replace")
                err = SlurmRESTError(method, url, status, "Slurm reported: " + errors, text)
                transient = any(t in errors for t in TRANSIENT)
            except urllib.error.HTTPError as exc:
                text = _read_error_body(exc)
                errors = (redirect_message(exc, "slurm.url") or _slurm_errors(text) or text.strip()[:500]
                          or exc.reason)
                err = SlurmRESTError(method, url, exc.code, errors, text)
                transient = exc.code in TRANSIENT_STATUS or any(t in errors for t in TRANSIENT)
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                err = SlurmRESTError(method, url, -1, f"cannot reach slurmrestd: {reason}")
                transient = True
            if not transient or attempt == attempts:
                raise err
            log.warning("%s (attempt %d of %d); retrying in %.1f s", err, attempt, attempts, delay)
            self._sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def version(self) -> str:
        """The REST API version in use (probed once with ``/ping`` when ``auto``)."""
        if self.api_version is None:
            tried = []
            for v in VERSIONS:
                try:
                    self.request("GET", f"/slurm/v{v}/ping", retry=False)
                except SlurmRESTError as exc:
                    if exc.status == 404:
                        tried.append(v)
                        continue
                    if exc.status == -1:
                        # not reachable at all: retry the whole probe as any request would be
                        self.request("GET", f"/slurm/v{v}/ping")
                    else:
                        raise
                self.api_version = v
                break
            else:
                raise SlurmRESTError("GET", f"{self.url}/slurm/v{VERSIONS[-1]}/ping", 404,
                                     f"slurmrestd serves none of the API versions v{', v'.join(VERSIONS)} "
                                     "(is openapi/slurmctld or openapi/v0.0.38 loaded?)")
            log.info("slurmrestd at %s speaks v%s", self.url, self.api_version)
        return self.api_version

    def _minor(self) -> int:
        return int(self.version().rsplit(".", 1)[1])

    # ------------------------------------------------------------------ reading

    def read_state(self) -> ClusterState:
        v = self.version()
        now = time.time()
        jobs = self._read_jobs(v, now)
        nodes_path = f"/slurm/v{v}/nodes"
        nodes = parse.decode_nodes_json(self.request("GET", nodes_path), source=f"GET {self.url}{nodes_path}")
        return ClusterState(tuple(jobs.records), tuple(nodes.records), version=jobs.version, read_at=now,
                            skipped_records=len(jobs.skipped) + len(nodes.skipped), skipped_jobs=jobs.skipped_ids)

    def _read_jobs(self, v: str, now: float) -> parse.Decoded:
        """The job set: a full read, or the last one again when Slurm says nothing changed since."""
        path = f"/slurm/v{v}/jobs"
        since = self._jobs_since
        if self._jobs is None or since is None or self._reads_since_full + 1 >= self.full_read_every:
            since = None
        query = path if since is None else f"{path}?update_time={int(since)}"
        source = f"GET {self.url}{query}"
        try:
            text = self.request("GET", query, raw=True)
        except SlurmRESTError as exc:
            if since is None or exc.status != 304:
                raise
            text = None  # 22.05: 304 Not Modified
        decoded = None if text is None else parse.decode_squeue_json(text, source=source, cache=self._job_cache)
        if since is not None and (decoded is None or (decoded.unchanged and not decoded.records)):
            self._reads_since_full += 1
            self.jobs_reused += 1
            self._jobs_since = max(since, now - self.clock_margin_s) if self._jobs.last_update is None else since
            return self._jobs
        assert decoded is not None
        self._jobs = decoded
        self._reads_since_full = 0 if since is None else self._reads_since_full + 1
        self._jobs_since = decoded.last_update if decoded.last_update is not None else now - self.clock_margin_s
        return decoded

    # ------------------------------------------------------------------ acting

    def _unsupported(self, method: str, path: str, what: str, since: str) -> SlurmRESTError:
        return SlurmRESTError(method, f"{self.url}{path}", -1,
                              f"slurmrestd v{self.version()} cannot {what} (REST supports it from {since}); "
                              "use slurm.backend: cli on the head node")

    def _update_job(self, job_id: int, body: dict[str, Any]) -> None:
        self.request("POST", f"/slurm/v{self.version()}/job/{int(job_id)}", body)

    def hold(self, job_id: int, admin_comment: str) -> None:
        if self._minor() < 39:
            raise self._unsupported("POST", f"/slurm/v{self.version()}/job/{int(job_id)}",
                                    "set a job's AdminComment (the hold marker)", "v0.0.39, Slurm 23.02")
        # marker first, as the cli backend does: a hold without it would look like someone else's
        self._update_job(job_id, {"admin_comment": admin_comment})
        self._update_job(job_id, {"hold": True})

    @property
    def reshape(self) -> str:
        """``shrink`` from v0.0.39 (``required_nodes`` of a running job), ``none`` before."""
        return "shrink" if self._minor() >= 39 else "none"

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str, node_count: int | None = None) -> None:
        if self._minor() < 39:
            raise self._unsupported("POST", f"/slurm/v{self.version()}/job/{int(job_id)}",
                                    "pin a job to nodes (required_nodes is a disabled key)", "v0.0.39, Slurm 23.02")
        body: dict[str, Any] = {"required_nodes": list(nodes), "admin_comment": admin_comment}
        if node_count is not None:  # exactly k: a moldable job's open range would let Slurm add nodes
            body["minimum_nodes"] = body["maximum_nodes"] = node_count
        self._update_job(job_id, body)
        self._update_job(job_id, {"hold": False})

    def shrink(self, job_id: int, nodes: Sequence[str]) -> None:
        # slurmctld reads the required nodes of a running job as the nodes it keeps (_update_job(),
        # src/slurmctld/job_mgr.c), as it reads scontrol's NodeList=. slurmrestd writes no resize scripts.
        if self._minor() < 39:
            raise self._unsupported("POST", f"/slurm/v{self.version()}/job/{int(job_id)}",
                                    "shrink a running job (required_nodes is a disabled key)", "v0.0.39, Slurm 23.02")
        self._update_job(job_id, {"required_nodes": list(nodes)})

    def requeue(self, job_id: int) -> None:
        path = f"/slurm/v{self.version()}/job/{int(job_id)}/requeue"
        if self._minor() < 45:
            raise self._unsupported("POST", path, "requeue a job", "v0.0.45, Slurm 26.05")
        self.request("POST", path, {})

    def cancel(self, job_id: int) -> None:
        self.request("DELETE", f"/slurm/v{self.version()}/job/{int(job_id)}")

    def _node_state(self, node: str, state: str) -> None:
        path = f"/slurm/v{self.version()}/node/{node}"
        if self._minor() < 39:
            raise self._unsupported("POST", path, f"set a node's state to {state}", "v0.0.39, Slurm 23.02")
        self.request("POST", path, {"state": [state]})

    def power_down(self, node: str) -> None:
        self._node_state(node, "POWER_DOWN")

    def power_up(self, node: str) -> None:
        self._node_state(node, "POWER_UP")

    def ping(self) -> bool:
        try:
            self.request("GET", f"/slurm/v{self.version()}/ping", retry=False)
        except (SlurmRESTError, ConfigError):
            return False
        return True


def _read_error_body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return ""


class _ErrorsOnly(msgspec.Struct, gc=False):
    errors: Any = None


_ERRORS_DECODER = msgspec.json.Decoder(_ErrorsOnly)


def _slurm_errors(text: str | bytes) -> str:
    """Slurm's ``errors`` array of a response as one line; ``""`` when none (or not JSON).

    Reads the ``errors`` key alone (a 100,000-job reply is not turned into objects here).
    """
    try:
        errors = _ERRORS_DECODER.decode(text).errors
    except (msgspec.MsgspecError, RecursionError):
        try:  # what msgspec refuses and json.loads reads (a lone surrogate), or not JSON at all
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return ""
        errors = doc.get("errors") if isinstance(doc, dict) else None
    if not errors:
        return ""
    doc = {"errors": errors}
    try:
        parse._raise_on_errors(doc, "slurmrestd")
    except parse.SlurmOutputError as exc:
        return exc.problem.removeprefix("Slurm reported: ")
    return ""
