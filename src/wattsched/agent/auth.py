"""Command authentication with munge credentials, the way Slurm authenticates its own RPCs.

The client runs ``munge`` on a *canonical message* that binds the credential to one request on one node::

    wattsched-agent-v2
    POST
    /v1/cap
    <the target node's name, as the agent knows itself (``--node-name``)>
    <sha256 of the body, hex>
    <random nonce, hex>
    <unix time, integer seconds>

and sends the credential text in the ``X-Wattsched-Munge`` header. munged encodes the caller's UID and GID into the
credential; nobody can forge them without the cluster's munge key. The agent runs ``unmunge`` on it and accepts the
request only if munged decodes it (``STATUS`` 0), its ``UID`` is allowed (root and the SlurmUser), it is fresh (its
``ENCODE_TIME`` within ``ttl_s``), it was never seen before, and the message matches this request's method, path,
body hash and *this* node: munge's key is shared by the whole cluster and each munged keeps its own replay cache, so
without the node name a command captured on its way to one node would be accepted by every other one. munged
answers ``Replayed credential`` (status 17) to a credential it has decoded before; the agent also keeps the hashes
of the credentials it accepted until they expire, so a replay is refused even across a munged restart.

Replies are signed too. The client sends a fresh nonce in ``X-Wattsched-Nonce``; the agent answers with a munge
credential over a :func:`reply_message` (its node name, the HTTP status, that nonce and the body's hash) in
``X-Wattsched-Reply-Munge``, and the client accepts the answer only if munged decodes it with the UID the agent runs
as (root). The agent's port (9818) is unprivileged: while the agent is down, any local user may bind it and receive
the daemon's commands; such an impostor can mint munge credentials only with its own UID, so its "ok" is refused
(:func:`check_reply`) and the daemon records the node's command as failed instead of applied.

``unmunge`` prints metadata lines (``KEY: value``), a blank line and the payload; with ``--numeric`` the values are
numbers (``STATUS: 17``), without it they are text with the number in parentheses
(``STATUS: Replayed credential (17)``, ``UID: root (0)``). :func:`parse_unmunge` reads both. Status numbers are
``munge_err_t`` from munge.h (munge 0.5.15).

Every munge and unmunge call goes through :func:`run_command`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from wattsched.errors import WattschedError

__all__ = [
    "HEADER", "NONCE_HEADER", "PROTOCOL", "REPLY_HEADER", "Credential", "MungeError", "Verdict", "Verifier",
    "canonical_message", "check_reply", "parse_message", "parse_unmunge", "reply_message", "run_command", "sign",
    "sign_request", "valid_nonce",
]

PROTOCOL = "wattsched-agent-v2"
REPLY_PROTOCOL = "wattsched-agent-reply-v1"
HEADER = "X-Wattsched-Munge"
NONCE_HEADER = "X-Wattsched-Nonce"
REPLY_HEADER = "X-Wattsched-Reply-Munge"
_NONCE = re.compile(r"[0-9a-f]{16,64}")

# munge_err_t (munge.h)
EMUNGE_SUCCESS = 0
EMUNGE_SOCKET = 6
EMUNGE_TIMEOUT = 7
EMUNGE_CRED_EXPIRED = 15
EMUNGE_CRED_REWOUND = 16
EMUNGE_CRED_REPLAYED = 17

REASONS = ("ok", "missing_credential", "invalid_credential", "replayed", "expired", "clock_skew", "uid_not_allowed",
           "payload_mismatch", "wrong_node", "munge_unavailable")
"""Every ``Verdict.reason``; a fixed set, so it can label a metric."""


class MungeError(WattschedError):
    """``munge`` or ``unmunge`` could not run or failed. Carries the command, exit code and stderr."""

    def __init__(self, cmd: list[str], returncode: int | None, stderr: str = ""):
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr
        what = "could not run" if returncode is None else f"exited with {returncode}"
        super().__init__(f"{' '.join(cmd)!r} {what}: {stderr.strip() or 'no message'}")


def run_command(cmd: list[str], stdin: bytes, timeout_s: float = 10.0) -> subprocess.CompletedProcess:
    """Run ``cmd`` with ``stdin``; the one place this package shells out. ``MungeError`` if it cannot start."""
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise MungeError(cmd, None, f"{exc.filename or cmd[0]} not found (install the munge package)") from exc
    except subprocess.TimeoutExpired as exc:
        raise MungeError(cmd, None, f"no answer within {timeout_s:g} s (is munged running?)") from exc
    except OSError as exc:
        raise MungeError(cmd, None, str(exc)) from exc


def _check_node(node: str) -> str:
    if not isinstance(node, str) or not node or any(c.isspace() for c in node):
        raise ValueError(f"a node name must be a non-empty word, got {node!r}")
    return node


def canonical_message(method: str, path: str, body: bytes, *, node: str, nonce: str | None = None,
                      timestamp: int | None = None) -> bytes:
    """The message a request's credential carries: bound to the method, path, body and target ``node``.

    >>> canonical_message("post", "/v1/cap", b"", node="cn01", nonce="ab", timestamp=7).decode().splitlines()[:4]
    ['wattsched-agent-v2', 'POST', '/v1/cap', 'cn01']
    """
    nonce = secrets.token_hex(16) if nonce is None else nonce
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    lines = [PROTOCOL, method.upper(), path, _check_node(node), hashlib.sha256(body).hexdigest(), nonce,
             str(timestamp)]
    return ("\n".join(lines) + "\n").encode()


def reply_message(node: str, status: int, nonce: str, body: bytes) -> bytes:
    """What an agent signs to vouch for one answer: its node name, the status, the request's nonce, the body.

    >>> reply_message("cn01", 200, "00ff", b"{}").decode().splitlines()[:4]
    ['wattsched-agent-reply-v1', 'cn01', '200', '00ff']
    """
    lines = [REPLY_PROTOCOL, _check_node(node), str(int(status)), nonce, hashlib.sha256(body).hexdigest()]
    return ("\n".join(lines) + "\n").encode()


def valid_nonce(text: str | None) -> bool:
    """Whether ``text`` is a nonce a client may send (16 to 64 lowercase hex digits).

    >>> valid_nonce("0123456789abcdef"), valid_nonce("not hex at all!!"), valid_nonce(None)
    (True, False, False)
    """
    return bool(text) and _NONCE.fullmatch(text) is not None


class Message(NamedTuple):
    method: str
    path: str
    node: str
    body_sha256: str
    nonce: str
    timestamp: int


def parse_message(payload: bytes) -> Message | None:
    """The fields of a canonical message, or ``None`` if ``payload`` is not one.

    >>> parse_message(canonical_message("POST", "/v1/freq", b"{}", node="cn01", nonce="n", timestamp=5)).path
    '/v1/freq'
    >>> parse_message(b"hello") is None
    True
    """
    try:
        lines = payload.decode().split("\n")
    except UnicodeDecodeError:
        return None
    if len(lines) != 8 or lines[0] != PROTOCOL or lines[7] != "" or not lines[6].isdigit():
        return None
    return Message(lines[1], lines[2], lines[3], lines[4], lines[5], int(lines[6]))


def _socket_args(socket: str | os.PathLike | None) -> list[str]:
    return [f"--socket={os.fspath(socket)}"] if socket else []


def sign(payload: bytes, socket: str | os.PathLike | None = None, *, munge: str = "munge",
         run: Callable[..., subprocess.CompletedProcess] = run_command) -> str:
    """A munge credential for ``payload`` (usually a :func:`canonical_message`) from the munged at ``socket``.

    The payload goes through stdin (``munge --socket=S``), never the command line.
    """
    cmd = [munge, *_socket_args(socket)]
    proc = run(cmd, payload)
    if proc.returncode != 0:
        raise MungeError(cmd, proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout.decode().strip()


def sign_request(method: str, path: str, body: bytes, socket: str | os.PathLike | None = None, *, node: str,
                 **kwargs) -> str:
    """A credential bound to one request to ``node``: :func:`sign` of its :func:`canonical_message`."""
    return sign(canonical_message(method, path, body, node=node), socket, **kwargs)


def check_reply(credential: str | None, *, node: str, status: int, nonce: str, body: bytes,
                agent_uids: set[int] | frozenset[int] = frozenset({0}), socket: str | os.PathLike | None = None,
                unmunge: str = "unmunge", run: Callable[..., subprocess.CompletedProcess] = run_command) -> str:
    """Why an agent's answer is not vouched for by the agent of ``node`` (``""`` if it is).

    ``credential`` is the answer's ``X-Wattsched-Reply-Munge`` header. It must decode (munged checks its MAC, age
    and replay), carry one of ``agent_uids`` (the agent runs as root; a local user squatting the agent's port can
    only sign with its own UID) and sign exactly :func:`reply_message` of this node, status, nonce and body.
    """
    if not credential:
        return f"the answer carries no {REPLY_HEADER} header (not the wattsched agent of {node}, or an old one)"
    cmd = [unmunge, "--numeric", *_socket_args(socket)]
    try:
        proc = run(cmd, credential.strip().encode() + b"\n")
    except MungeError as exc:
        return f"cannot check the answer's signature: {exc}"
    cred = parse_unmunge(proc.stdout, proc.returncode)
    if cred.status != EMUNGE_SUCCESS:
        stderr = proc.stderr.decode(errors="replace").strip()
        return f"the answer's signature is refused by munged (status {cred.status}{': ' + stderr if stderr else ''})"
    if cred.uid not in agent_uids:
        return (f"the answer is signed by uid {cred.uid}, not by the agent's uid {sorted(agent_uids)} (another "
                "process may be listening on the agent's port)")
    if not hmac.compare_digest(cred.payload, reply_message(node, status, nonce, body)):
        return f"the answer's signature is not for this answer from node {node}"
    return ""


@dataclass
class Credential:
    """What ``unmunge`` says about a credential."""

    status: int
    status_text: str = ""
    uid: int | None = None
    gid: int | None = None
    encode_time: int | None = None
    ttl_s: int | None = None
    payload: bytes = b""
    metadata: dict[str, str] = field(default_factory=dict)


_NUM_IN_PARENS = re.compile(r"\((-?\d+)\)\s*$")


def _meta_int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    m = _NUM_IN_PARENS.search(text)
    return int(m.group(1)) if m else None


def parse_unmunge(stdout: bytes, returncode: int = 0) -> Credential:
    """Parse ``unmunge`` output (numeric or text metadata, a blank line, the payload).

    >>> c = parse_unmunge(b"STATUS:  Replayed credential (17)\\nUID:  root (0)\\nENCODE_TIME:  1795317341\\n\\nhi", 17)
    >>> c.status, c.status_text, c.uid, c.encode_time, c.payload
    (17, 'Replayed credential', 0, 1795317341, b'hi')
    """
    head, sep, payload = stdout.partition(b"\n\n")
    if not sep:
        head, payload = stdout, b""
    meta = {}
    for line in head.decode(errors="replace").splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip().isupper():
            meta[key.strip()] = value.strip()
    status = _meta_int(meta.get("STATUS"))
    if status is None:
        status = returncode if returncode else (0 if meta else 1)
    text = meta.get("STATUS", "")
    text = _NUM_IN_PARENS.sub("", text).strip() if _NUM_IN_PARENS.search(text) else ""
    return Credential(status=status, status_text=text, uid=_meta_int(meta.get("UID")),
                      gid=_meta_int(meta.get("GID")), encode_time=_meta_int(meta.get("ENCODE_TIME")),
                      ttl_s=_meta_int(meta.get("TTL")), payload=payload, metadata=meta)


class Verdict(NamedTuple):
    """The outcome of :meth:`Verifier.verify`: the credential's UID (if munged could decode it), ``reason``
    (``"ok"`` or one of :data:`REASONS`) and a human-readable ``detail`` for the log."""

    uid: int | None
    reason: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason == "ok"


class _Accepted(NamedTuple):
    verdict: Verdict
    msg: Message


class Verifier:
    """Checks munge credentials of agent commands.

    Parameters
    ----------
    allowed_uids : set of int
        UIDs whose credentials are accepted (``wattsched agent`` passes root and the SlurmUser).
    socket : path, optional
        munged's socket (default: munge's compiled-in one).
    ttl_s : float
        Maximum age of a credential, from munged's ``ENCODE_TIME``; also how long its hash stays in the replay
        cache. munged enforces its own TTL (300 s by default) as well.
    node : str
        The name this agent answers to (its Slurm node name): a credential for another node is refused.
    clock : callable
        Epoch seconds (injected for tests).
    """

    def __init__(self, allowed_uids: set[int], socket: str | os.PathLike | None = None, ttl_s: float = 300, *,
                 node: str, clock: Callable[[], float] = time.time, unmunge: str = "unmunge",
                 run: Callable[..., subprocess.CompletedProcess] = run_command):
        self.allowed_uids = set(allowed_uids)
        self.node = _check_node(node)
        self.socket = socket
        self.ttl_s = ttl_s
        self.clock = clock
        self.unmunge = unmunge
        self.run = run
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Verifier(allowed_uids={sorted(self.allowed_uids)}, socket={self.socket!r}, ttl_s={self.ttl_s!r}, "
                f"node={self.node!r})")

    def verify(self, credential: str, method: str, path: str, body: bytes) -> Verdict:
        """Decide whether ``credential`` authorizes this request. Never raises for a bad credential."""
        verdict, msg = self.verify_head(credential, method, path)
        if not verdict.ok:
            return verdict
        return self.check_body(verdict, msg, body)

    def check_body(self, verdict: Verdict, msg: Message, body: bytes) -> Verdict:
        """The verdict of :meth:`verify_head` once the body has been read: its hash must be the credential's."""
        digest = hashlib.sha256(body).hexdigest()
        if msg.body_sha256 != digest:
            return Verdict(verdict.uid, "payload_mismatch",
                           f"credential is for body sha256 {msg.body_sha256[:12]}, the request has body sha256 "
                           f"{digest[:12]}")
        return verdict

    def verify_head(self, credential: str, method: str, path: str) -> tuple[Verdict, Message | None]:
        """Check everything but the body: the credential, its UID and age, and the method and path it is for.

        The agent calls this before it reads a request's body, so an unauthenticated client cannot make it
        wait for (or buffer) one; :meth:`check_body` then compares the body's hash.
        """
        result = self._verify_head(credential, method, path)
        if isinstance(result, _Accepted):
            return result.verdict, result.msg
        return result, None

    def _verify_head(self, credential: str, method: str, path: str):
        credential = (credential or "").strip()
        if not credential:
            return Verdict(None, "missing_credential", "no credential")
        cmd = [self.unmunge, "--numeric", *_socket_args(self.socket)]
        try:
            proc = self.run(cmd, credential.encode() + b"\n")
        except MungeError as exc:
            return Verdict(None, "munge_unavailable", str(exc))
        cred = parse_unmunge(proc.stdout, proc.returncode)
        stderr = proc.stderr.decode(errors="replace").strip()
        uid = cred.uid
        if cred.status != EMUNGE_SUCCESS:
            detail = f"unmunge status {cred.status}" + (f": {stderr}" if stderr else "")
            if cred.status == EMUNGE_CRED_REPLAYED:
                return Verdict(uid, "replayed", "munged: replayed credential")
            if cred.status == EMUNGE_CRED_EXPIRED:
                return Verdict(uid, "expired", "munged: expired credential")
            if cred.status == EMUNGE_CRED_REWOUND:
                return Verdict(uid, "clock_skew", "munged: rewound credential (encoded in the future)")
            if cred.status in (EMUNGE_SOCKET, EMUNGE_TIMEOUT):
                return Verdict(None, "munge_unavailable", detail)
            return Verdict(uid, "invalid_credential", detail)
        if uid is None or cred.encode_time is None:
            return Verdict(uid, "invalid_credential", f"unmunge output without UID or ENCODE_TIME: {cred.metadata}")

        now = self.clock()
        digest = hashlib.sha256(credential.encode()).hexdigest()
        keep_until = max(cred.encode_time + max(self.ttl_s, cred.ttl_s or 0), now) + 1
        with self._lock:
            for key in [k for k, until in self._seen.items() if until < now]:
                del self._seen[key]
            if digest in self._seen:
                return Verdict(uid, "replayed", "credential already used (agent's replay cache)")
            self._seen[digest] = keep_until

        if uid not in self.allowed_uids:
            return Verdict(uid, "uid_not_allowed", f"uid {uid} is not in {sorted(self.allowed_uids)}")
        age = now - cred.encode_time
        if age > self.ttl_s:
            return Verdict(uid, "expired", f"credential is {age:.0f} s old (ttl {self.ttl_s:g} s)")
        if age < -self.ttl_s:
            return Verdict(uid, "clock_skew", f"credential encoded {-age:.0f} s in the future")
        msg = parse_message(cred.payload)
        if msg is None:
            return Verdict(uid, "payload_mismatch", "payload is not a wattsched request")
        if (msg.method, msg.path) != (method.upper(), path):
            return Verdict(uid, "payload_mismatch",
                           f"credential is for {msg.method} {msg.path}, request is {method.upper()} {path}")
        if msg.node != self.node:
            return Verdict(uid, "wrong_node", f"credential is for node {msg.node!r}, this agent is {self.node!r}")
        return _Accepted(Verdict(uid, "ok"), msg)
