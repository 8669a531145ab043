"""The node agent's HTTP server: metrics and state for anyone, power commands for munge-authenticated callers.

Endpoints (every answer but ``/metrics`` is JSON ``{"ok": bool, ...}``; failures come back as data, with the
values read back from sysfs after the command):

``GET /metrics``
    Prometheus text, read from sysfs at scrape time: ``wattsched_agent_rapl_energy_joules_total{package}``,
    ``wattsched_agent_rapl_power_limit_watts{package}``, ``wattsched_agent_rapl_max_power_watts{package}``,
    ``wattsched_agent_cpu_scaling_max_frequency_hertz``, ``wattsched_agent_cpu_max_frequency_hertz``,
    ``wattsched_agent_cpu_min_frequency_hertz``, and the counters ``wattsched_agent_commands_total{command,outcome}``,
    ``wattsched_agent_rejected_requests_total{reason}`` and ``wattsched_agent_sysfs_errors_total``.
``GET /v1/state``
    Packages (long-term limit, maximum, energy) and frequencies.
``POST /v1/cap`` with ``{"watts": W}`` or ``{"watts": W, "package": i}``
    Sets the RAPL long-term (PL1) limit. Without ``package``, ``W`` is a *node* cap split evenly across the
    packages (W/n each): RAPL has no node-level limit, and the packages of a node run the same job mix.
    ``{"watts": null}`` lifts the cap: each package goes back to its ``constraint_X_max_power_uw``.
``POST /v1/freq`` with ``{"hz": F}``
    Sets every cpufreq policy's ``scaling_max_freq``; ``{"hz": null}`` restores ``cpuinfo_max_freq``.

Both POSTs accept an optional ``"request_id"`` that is echoed and logged, and need the header
``X-Wattsched-Munge: <credential>`` (:mod:`wattsched.agent.auth`): missing → 401, refused → 403 (munged
unreachable → 503). Malformed bodies → 400; values outside the hardware range → 422 and nothing is written; a sysfs
write failure → 500. Every rejection is logged with the UID and reason and counted.

``GET /v1/state`` and ``/metrics`` are not authenticated, like node_exporter. The kernel restricts the raw RAPL
``energy_uj`` to root since 5.10: read at a fine rate it leaks what the CPU computes (PLATYPUS, CVE-2020-8694). The
agent therefore never serves the raw counter: energy is rounded down to whole joules and read from sysfs at most
once per ``energy_period_s`` (1 s), for every reader, which is ample for power averaged over a scrape interval and for
energy budgets, and far too coarse for the attack (which needs sub-millisecond, microjoule samples).

Every answer to a request that carries ``X-Wattsched-Nonce`` is signed (``X-Wattsched-Reply-Munge``, see
:mod:`wattsched.agent.auth`), so the daemon can tell the agent from another process bound to its port.

Hardening: the agent listens on 127.0.0.1 unless told otherwise (``wattsched agent --address ADDR``, the node's
management-network address, or ``0.0.0.0`` for every interface); a POST is authenticated from its headers before
its body is read (a request without a credential is answered 401 at once, its body never read); each request, from
its first byte to the end of its body, must arrive within ``timeout_s`` (default 10 s) in total, however slowly it
trickles in (a half-sent body is answered 408, a half-sent head closed); at most ``max_connections`` (default 16)
requests are served at once and at most ``max_per_peer`` (default 4) from one address, others get 503 at once, so a
few slow clients cannot lock the daemon out; ``Content-Length`` must be a number in [0, 65536] (400, 413).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from wattsched.agent.auth import HEADER, NONCE_HEADER, REASONS, REPLY_HEADER, Verifier, reply_message, valid_nonce
from wattsched.agent.auth import sign as munge_sign
from wattsched.agent.sysfs import Package, Sysfs, SysfsError

__all__ = ["AgentServer", "SysfsCollector"]

log = logging.getLogger("wattsched.agent")

MAX_BODY = 64 * 1024
TIMEOUT_S = 10.0
MAX_CONNECTIONS = 16
MAX_PER_PEER = 4
ENERGY_PERIOD_S = 1.0
MAX_DIGITS = 24  # a JSON integer longer than this is not a power or a frequency
COMMANDS = ("cap", "freq")
OUTCOMES = ("ok", "invalid", "bad_request", "error")


class CoarseEnergy:
    """RAPL package energy as the agent serves it: whole joules, read from sysfs at most once per ``period_s``.

    The raw ``energy_uj`` is root-only since Linux 5.10 (CVE-2020-8694, PLATYPUS); this is what unauthenticated
    readers get instead. Values are microjoules (multiples of 10**6), so the counter keeps its unit and its wrap
    at ``max_energy_range_uj``.
    """

    def __init__(self, sysfs: Sysfs, period_s: float = ENERGY_PERIOD_S, *,
                 clock: Callable[[], float] = time.monotonic):
        self.sysfs = sysfs
        self.period_s = period_s
        self.clock = clock
        self._cache: dict[int, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def energy_uj(self, p: Package) -> int:
        now = self.clock()
        with self._lock:
            cached = self._cache.get(p.index)
            if cached is not None and now - cached[0] < self.period_s:
                return cached[1]
        value = int(self.sysfs.energy_uj(p)) // 1_000_000 * 1_000_000
        with self._lock:
            self._cache[p.index] = (now, value)
        return value


class SysfsCollector:
    """Prometheus collector reading RAPL and cpufreq at scrape time. A failed read drops that series and counts.

    Energy comes through ``energy`` (a :class:`CoarseEnergy` over ``sysfs`` by default), never the raw counter.
    """

    def __init__(self, sysfs: Sysfs, errors: Counter | None = None, energy: CoarseEnergy | None = None):
        self.sysfs = sysfs
        self.errors = errors
        self.energy = energy if energy is not None else CoarseEnergy(sysfs)

    def describe(self):
        # Without describe() the registry would call collect() (read sysfs) at registration.
        return [
            CounterMetricFamily("wattsched_agent_rapl_energy_joules", "RAPL package energy counter (wraps)",
                                labels=["package"]),
            GaugeMetricFamily("wattsched_agent_rapl_power_limit_watts", "RAPL long-term power limit",
                              labels=["package"]),
            GaugeMetricFamily("wattsched_agent_rapl_max_power_watts", "Highest long-term limit the package accepts",
                              labels=["package"]),
            GaugeMetricFamily("wattsched_agent_cpu_scaling_max_frequency_hertz",
                              "Frequency ceiling: highest scaling_max_freq over cpufreq policies"),
            GaugeMetricFamily("wattsched_agent_cpu_max_frequency_hertz", "Hardware maximum (cpuinfo_max_freq)"),
            GaugeMetricFamily("wattsched_agent_cpu_min_frequency_hertz", "Hardware minimum (cpuinfo_min_freq)"),
        ]

    def _failed(self, what: str, exc: Exception) -> None:
        log.warning("metrics: %s: %s", what, exc)
        if self.errors is not None:
            self.errors.inc()

    def collect(self):
        energy, limit, top = self.describe()[:3]
        try:
            packages = self.sysfs.packages()
        except SysfsError as exc:
            self._failed("listing RAPL packages", exc)
            packages = []
        for p in packages:
            label = [str(p.index)]
            for family, read, scale in ((energy, self.energy.energy_uj, 1e-6), (limit, self.sysfs.power_limit_w, 1),
                                        (top, self.sysfs.max_power_w, 1)):
                try:
                    family.add_metric(label, read(p) * scale)
                except SysfsError as exc:
                    self._failed(family.name, exc)
        yield from (energy, limit, top)
        try:
            if not self.sysfs.cpufreq_policies():
                return
            values = (self.sysfs.scaling_max_freq_hz(), self.sysfs.max_freq_hz(), self.sysfs.min_freq_hz())
        except SysfsError as exc:
            self._failed("cpufreq", exc)
            return
        for family, value in zip(self.describe()[3:], values):
            family.add_metric([], value)
            yield family


class _Reply(Exception):
    """Ends a request early with an HTTP status and a JSON body."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body


class _DeadlineReader(io.RawIOBase):
    """A socket's input that ends in ``TimeoutError`` at ``handler.deadline``, however the bytes trickle in.

    A plain socket timeout restarts with every byte received, so a client sending one byte per timeout holds a
    connection for ever (slowloris); each read here waits only for what is left of the request's deadline.
    """

    def __init__(self, sock, handler: _Handler):
        self.sock = sock
        self.handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.handler.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"request not received within {self.handler.timeout:g} s")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server_version = "wattsched-agent"
    agent: AgentServer  # set on the per-server subclass
    timeout = TIMEOUT_S  # the whole-request deadline (and the socket timeout of writes); set per server
    deadline = 0.0

    def setup(self):
        super().setup()
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self))

    def handle_one_request(self):
        self.deadline = time.monotonic() + self.timeout  # the next request, head and body, must arrive by then
        super().handle_one_request()

    def log_message(self, format, *args):  # the stdlib's signature
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.connection.settimeout(self.timeout)  # the answer gets its own time, not what the request left
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        headers = getattr(self, "headers", None)
        nonce = headers.get(NONCE_HEADER) if headers is not None else None
        if valid_nonce(nonce):
            credential = self.agent.sign_reply(status, nonce, body)
            if credential:
                self.send_header(REPLY_HEADER, credential)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, body: dict) -> None:
        self._send(status, json.dumps(body).encode() + b"\n", "application/json")

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept"))
            self._send(HTTPStatus.OK, encoder(self.agent.registry), content_type)
        elif path == "/v1/state":
            state = self.agent.state()
            self._json(HTTPStatus.OK, state)
        else:
            self._json(HTTPStatus.NOT_FOUND, {"ok": False, "error": f"no such endpoint: GET {path}"})

    def do_POST(self):
        try:
            status, body = self.agent.handle_post(self)
        except _Reply as reply:
            status, body = reply.status, reply.body
            self.close_connection = True  # the body may be unread: never parse it as the next request
        except Exception as exc:  # a bug must not cost the client its answer
            log.exception("POST %s failed", self.path)
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, {"ok": False, "error": f"internal error: {exc}"}
        self._json(status, body)


class _BoundedServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` serving at most ``max_connections`` connections at once, and at most
    ``max_per_peer`` from one address; others get 503 at once."""

    daemon_threads = True

    def __init__(self, address, handler, max_connections: int, max_per_peer: int = MAX_PER_PEER):
        self._slots = threading.BoundedSemaphore(max_connections)
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self._peers: dict[str, int] = {}
        self._peers_lock = threading.Lock()
        super().__init__(address, handler)

    def _refuse(self, request, client_address, why: str) -> None:
        body = json.dumps({"ok": False, "error": why}).encode() + b"\n"
        with contextlib.suppress(OSError):
            request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        log.warning("refused a connection from %s: %s", client_address[0], why)
        self.shutdown_request(request)

    def _leave(self, peer: str) -> None:
        with self._peers_lock:
            left = self._peers.get(peer, 1) - 1
            if left > 0:
                self._peers[peer] = left
            else:
                self._peers.pop(peer, None)

    def process_request(self, request, client_address):
        peer = client_address[0]
        with self._peers_lock:
            if self._peers.get(peer, 0) >= self.max_per_peer:
                busy = True
            else:
                busy = False
                self._peers[peer] = self._peers.get(peer, 0) + 1
        if busy:
            self._refuse(request, client_address, f"too many connections from {peer} ({self.max_per_peer} open)")
            return
        if not self._slots.acquire(blocking=False):
            self._leave(peer)
            self._refuse(request, client_address, f"too many connections ({self.max_connections} open)")
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            self._leave(peer)
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
            self._leave(client_address[0])


class AgentServer:
    """The node agent: ``ThreadingHTTPServer`` over a :class:`Sysfs`, commands checked by a :class:`Verifier`.

    The socket is bound on construction (``port=0`` picks a free port: see :attr:`port`); :meth:`serve_forever`
    serves until :meth:`shutdown`.

    Parameters
    ----------
    sysfs : Sysfs
    verifier : Verifier
    address, port : str, int
        Where to listen; loopback by default (give the management-network address to serve the daemon).
    registry : CollectorRegistry, optional
        Where the agent's metrics go; a fresh registry by default (never the global one).
    timeout_s : float
        Deadline of one request, head and body together, from its first byte (a half-sent body is answered 408).
    max_connections : int
        Requests served at once; more get 503 without being read.
    max_per_peer : int
        Requests served at once for one client address; more get 503 without being read.
    energy_period_s : float
        Energy is read from sysfs at most this often and served in whole joules (:class:`CoarseEnergy`).
    sign : callable, optional
        Signs a reply payload (:func:`wattsched.agent.auth.sign` through the verifier's munged by default).

    The agent's node name, which commands must be for and replies name, is ``verifier.node``.
    """

    def __init__(self, sysfs: Sysfs, verifier: Verifier, address: str = "127.0.0.1", port: int = 9818,
                 registry: CollectorRegistry | None = None, *, timeout_s: float = TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS, max_per_peer: int = MAX_PER_PEER,
                 energy_period_s: float = ENERGY_PERIOD_S, sign: Callable[[bytes], str] | None = None):
        self.sysfs = sysfs
        self.verifier = verifier
        self.node = verifier.node
        self._sign = sign if sign is not None else (lambda payload: munge_sign(payload, verifier.socket,
                                                                               run=verifier.run))
        self.energy = CoarseEnergy(sysfs, energy_period_s)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.commands = Counter("wattsched_agent_commands", "Authenticated commands, by command and outcome",
                                ["command", "outcome"], registry=self.registry)
        self.rejected = Counter("wattsched_agent_rejected_requests", "Commands refused by authentication, by reason",
                                ["reason"], registry=self.registry)
        self.sysfs_errors = Counter("wattsched_agent_sysfs_errors", "sysfs reads that failed during a scrape",
                                    registry=self.registry)
        for command in COMMANDS:
            for outcome in OUTCOMES:
                self.commands.labels(command, outcome)
        for reason in REASONS[1:]:
            self.rejected.labels(reason)
        self.registry.register(SysfsCollector(sysfs, self.sysfs_errors, self.energy))
        self._lock = threading.Lock()
        self._serving = False
        handler = type("AgentHandler", (_Handler,), {"agent": self, "timeout": timeout_s})
        self.httpd = _BoundedServer((address, port), handler, max_connections, max_per_peer)

    @property
    def address(self) -> str:
        return self.httpd.server_address[0]

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        host = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def serve_forever(self, poll_interval: float = 0.1) -> None:
        self._serving = True
        try:
            self.httpd.serve_forever(poll_interval)
        finally:
            self._serving = False

    def start(self) -> threading.Thread:
        """Serve in a daemon thread (tests, embedding); stop with :meth:`shutdown`."""
        thread = threading.Thread(target=self.serve_forever, name="wattsched-agent", daemon=True)
        self._serving = True
        thread.start()
        return thread

    def shutdown(self) -> None:
        """Stop serving (from another thread than :meth:`serve_forever`'s) and close the socket."""
        if self._serving:
            self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> AgentServer:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def sign_reply(self, status: int, nonce: str, body: bytes) -> str | None:
        """The credential vouching for one answer, or ``None`` (logged) if munged cannot sign."""
        try:
            return self._sign(reply_message(self.node, status, nonce, body))
        except Exception as exc:  # munged down: the answer goes out unsigned, the client refuses it
            log.error("cannot sign a reply: %s", exc)
            return None

    # --- state ------------------------------------------------------------------------------------------------------
    def _package_state(self, p: Package, errors: list[str]) -> dict:
        entry: dict = {"package": p.index, "name": p.name}
        for key, read in (("power_limit_w", self.sysfs.power_limit_w), ("max_power_w", self.sysfs.max_power_w),
                          ("energy_uj", self.energy.energy_uj),
                          ("max_energy_range_uj", self.sysfs.max_energy_range_uj)):
            try:
                entry[key] = read(p)
            except SysfsError as exc:
                entry[key] = None
                errors.append(str(exc))
        entry["energy_j"] = None if entry["energy_uj"] is None else entry["energy_uj"] / 1e6
        return entry

    def state(self) -> dict:
        """Packages and frequencies as read now; unreadable values are ``None`` and listed in ``errors``."""
        errors: list[str] = []
        try:
            packages = [self._package_state(p, errors) for p in self.sysfs.packages()]
        except SysfsError as exc:
            packages = []
            errors.append(str(exc))
        limits = [p["power_limit_w"] for p in packages]
        freq = None
        try:
            if self.sysfs.cpufreq_policies():
                freq = {"scaling_max_freq_hz": self.sysfs.scaling_max_freq_hz(),
                        "max_freq_hz": self.sysfs.max_freq_hz(), "min_freq_hz": self.sysfs.min_freq_hz(),
                        "policies": self.sysfs.policy_scaling_max_freq_hz()}
        except SysfsError as exc:
            errors.append(str(exc))
        state = {"ok": not errors, "packages": packages,
                 "power_limit_w": sum(limits) if packages and None not in limits else None, "freq": freq}
        if errors:
            state["errors"] = errors
        return state

    # --- commands ---------------------------------------------------------------------------------------------------
    def handle_post(self, req: _Handler) -> tuple[int, dict]:
        path = req.path
        command = {"/v1/cap": "cap", "/v1/freq": "freq"}.get(path)
        if command is None:
            return HTTPStatus.NOT_FOUND, {"ok": False, "error": f"no such endpoint: POST {path}"}
        length = self._content_length(req)
        peer = req.client_address[0]
        credential = req.headers.get(HEADER)
        if not credential:
            self._reject(peer, path, None, "missing_credential", f"no {HEADER} header")
            raise _Reply(HTTPStatus.UNAUTHORIZED, {"ok": False, "error": f"authentication required: send a munge "
                                                   f"credential in the {HEADER} header (wattsched.agent.client does)"})
        verdict, message = self.verifier.verify_head(credential, "POST", path)
        if verdict.ok:
            body = self._read_body(req, length)
            verdict = self.verifier.check_body(verdict, message, body)
        if not verdict.ok:
            self._reject(peer, path, verdict.uid, verdict.reason, verdict.detail)
            status = HTTPStatus.SERVICE_UNAVAILABLE if verdict.reason == "munge_unavailable" else HTTPStatus.FORBIDDEN
            raise _Reply(status, {"ok": False, "error": f"credential refused: {verdict.reason}"})
        key = "watts" if command == "cap" else "hz"
        try:
            data = json.loads(body or b"null", parse_constant=_refuse_constant, parse_int=_bounded_int)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            self.commands.labels(command, "bad_request").inc()
            log.warning("%s from uid %s: body is not JSON: %s", command, verdict.uid, exc)
            return HTTPStatus.BAD_REQUEST, {"ok": False, "command": command,
                                            "error": f"body is not valid JSON: {str(exc)[:200]}"}
        if not isinstance(data, dict) or key not in data:
            self.commands.labels(command, "bad_request").inc()
            log.warning("%s from uid %s: bad request body %r", command, verdict.uid, body[:200])
            return HTTPStatus.BAD_REQUEST, {"ok": False, "command": command,
                                            "error": f'body must be a JSON object with "{key}", e.g. {{"{key}": '
                                                     f'{200 if command == "cap" else 2.0e9}}}'}
        request_id = data.get("request_id")
        with self._lock:
            try:
                if command == "cap":
                    result = self._cap(data, verdict.uid, request_id)
                else:
                    result = self._freq(data, verdict.uid, request_id)
                status, outcome = HTTPStatus.OK, "ok"
            except ValueError as exc:
                status, outcome = HTTPStatus.UNPROCESSABLE_ENTITY, "invalid"
                result = {"ok": False, "error": str(exc)}
                log.warning("%s from uid %s (request %s) refused: %s", command, verdict.uid, request_id, exc)
            except SysfsError as exc:
                status, outcome = HTTPStatus.INTERNAL_SERVER_ERROR, "error"
                result = {"ok": False, "error": str(exc)}
                log.error("%s from uid %s (request %s) failed: %s", command, verdict.uid, request_id, exc)
        self.commands.labels(command, outcome).inc()
        result = {"ok": result.pop("ok", True), "command": command, "request_id": request_id, **result}
        result["state"] = self.state()  # what sysfs holds now, whatever happened
        return status, result

    @staticmethod
    def _content_length(req: _Handler) -> int:
        text = (req.headers.get("Content-Length") or "0").strip()
        if not text.isdigit() or len(text) > 12:
            raise _Reply(HTTPStatus.BAD_REQUEST, {"ok": False, "error": f"Content-Length must be a number of bytes "
                                                  f"from 0 to {MAX_BODY}, got {text[:40]!r}"})
        length = int(text)
        if length > MAX_BODY:
            raise _Reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"ok": False, "error": f"body over {MAX_BODY} bytes"})
        return length

    @staticmethod
    def _read_body(req: _Handler, length: int) -> bytes:
        if not length:
            return b""
        try:
            body = req.rfile.read(length)
        except TimeoutError:
            raise _Reply(HTTPStatus.REQUEST_TIMEOUT, {"ok": False, "error": "timed out reading the body"}) from None
        if len(body) < length:
            raise _Reply(HTTPStatus.BAD_REQUEST, {"ok": False, "error": f"body ended after {len(body)} of {length} "
                                                  "bytes"})
        return body

    def _reject(self, peer: str, path: str, uid: int | None, reason: str, detail: str) -> None:
        self.rejected.labels(reason).inc()
        log.warning("rejected POST %s from %s: uid %s, reason %s (%s)", path, peer,
                    "unknown" if uid is None else uid, reason, detail)

    def _cap(self, data: dict, uid: int | None, request_id) -> dict:
        watts, which = _finite(data["watts"], "watts"), data.get("package")
        packages = self.sysfs.packages()
        if not packages:
            raise ValueError(f"no RAPL packages under {self.sysfs.root / 'class/powercap'}: this node cannot be capped")
        if which is not None:
            if isinstance(which, bool) or not isinstance(which, int):
                raise ValueError(f'"package" must be a package index, got {which!r}')
            targets = [(self.sysfs.package(which), watts)]
        elif watts is None:
            targets = [(p, None) for p in packages]
        else:
            share = watts / len(packages) if isinstance(watts, (int, float)) and not isinstance(watts, bool) else watts
            targets = [(p, share) for p in packages]
        plan = []
        for p, w in targets:
            if w is None:
                w = self.sysfs.max_power_w(p)
                if w <= 0:
                    raise ValueError(f"cannot lift the cap of {p.name}: its maximum power is unknown "
                                     "(constraint max_power_uw is 0); send a value instead")
            try:
                self.sysfs.check_power_limit_w(p, w)
            except ValueError as exc:
                if which is None and watts is not None and len(packages) > 1:
                    raise ValueError(f"node cap {watts!r} W split over {len(packages)} packages: {exc}") from None
                raise
            plan.append((p, w))
        applied = {p.name: self.sysfs.set_power_limit_w(p, w) for p, w in plan}
        log.info("cap by uid %s (request %s): %s", uid, request_id,
                 ", ".join(f"{name} {value:g} W" for name, value in applied.items()))
        return {"requested_w": watts, "package": which, "applied_w": applied}

    def _freq(self, data: dict, uid: int | None, request_id) -> dict:
        hz = _finite(data["hz"], "hz")
        if not self.sysfs.cpufreq_policies():
            raise ValueError(f"no cpufreq policies under {self.sysfs.root / 'devices/system/cpu/cpufreq'}: "
                             "this node's frequency cannot be set")
        applied = self.sysfs.reset_max_freq() if hz is None else self.sysfs.set_max_freq_hz(hz)
        log.info("freq by uid %s (request %s): scaling_max_freq %g Hz", uid, request_id, applied)
        return {"requested_hz": hz, "scaling_max_freq_hz": applied,
                "policies": self.sysfs.policy_scaling_max_freq_hz()}


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits is out of range")
    return int(text)


def _finite(value, key: str):
    """``value`` if it is null or a finite number (as a float), else a ``ValueError`` naming ``key``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value  # sysfs's checks name what is expected
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f'"{key}" must be a finite number, got {str(value)[:40]}')
    return value
