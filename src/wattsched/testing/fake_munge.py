"""A stand-in for ``munge`` and ``unmunge`` with munged's semantics, for tests on machines without munge.

:class:`FakeMunge` is a ``run`` callable (the signature of :func:`wattsched.agent.auth.run_command`): given
``["munge", ...]`` it encodes stdin into a credential carrying the caller's UID (``uid``, settable per call with
:meth:`as_uid`), the encode time and the payload, authenticated with an HMAC under the "cluster key"; given
``["unmunge", "--numeric", ...]`` it prints what unmunge 0.5.15 prints with ``--numeric`` (metadata, a blank line,
the payload) and, as munged does, refuses a credential it has already decoded (status 17), an expired one (15) or
a forged one (status 11, ``EMUNGE_CRED_INVALID``). Two ``FakeMunge`` objects with the same ``key`` are two munged
daemons of one cluster: each keeps its own replay cache, which is what lets a credential captured on one node be
presented on another.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import time
from collections.abc import Callable

__all__ = ["FakeMunge"]


class FakeMunge:
    """One munged of a cluster whose key is ``key``; calls made through it run as ``uid``."""

    def __init__(self, key: bytes = b"cluster-key", uid: int = 0, ttl_s: int = 300, *,
                 clock: Callable[[], float] = time.time):
        self.key = key
        self.uid = uid
        self.ttl_s = ttl_s
        self.clock = clock
        self.seen: set[str] = set()
        self.calls: list[str] = []

    def as_uid(self, uid: int) -> FakeMunge:
        """The same munged and key, called by another user (its replay cache is shared)."""
        other = FakeMunge(self.key, uid, self.ttl_s, clock=self.clock)
        other.seen = self.seen
        other.calls = self.calls
        return other

    def __call__(self, cmd: list[str], stdin: bytes, timeout_s: float = 10.0) -> subprocess.CompletedProcess:
        self.calls.append(cmd[0])
        if cmd[0].endswith("unmunge"):
            return self._unmunge(cmd, stdin)
        body = base64.b64encode(json.dumps({"uid": self.uid, "gid": self.uid, "t": int(self.clock()),
                                            "p": base64.b64encode(stdin).decode()}).encode()).decode()
        mac = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
        return subprocess.CompletedProcess(cmd, 0, f"MUNGE:{body}:{mac}\n".encode(), b"")

    def _unmunge(self, cmd: list[str], stdin: bytes) -> subprocess.CompletedProcess:
        text = stdin.decode(errors="replace").strip()
        parts = text.split(":")
        if len(parts) != 3 or parts[0] != "MUNGE" or not hmac.compare_digest(
                hmac.new(self.key, parts[1].encode(), hashlib.sha256).hexdigest(), parts[2]):
            return subprocess.CompletedProcess(cmd, 11, b"", b"unmunge: Error: Invalid credential\n")
        fields = json.loads(base64.b64decode(parts[1]))
        status = 0
        if text in self.seen:
            status = 17
        elif self.clock() - fields["t"] > self.ttl_s:
            status = 15
        self.seen.add(text)
        head = (f"STATUS:          {status}\nENCODE_HOST:     127.0.0.1\nENCODE_TIME:     {fields['t']}\n"
                f"DECODE_TIME:     {int(self.clock())}\nTTL:             {self.ttl_s}\nUID:             "
                f"{fields['uid']}\nGID:             {fields['gid']}\n\n")
        return subprocess.CompletedProcess(cmd, status, head.encode() + base64.b64decode(fields["p"]), b"")
