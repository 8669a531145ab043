"""Client of the node agent: signed power commands and state, answers as data.

Every HTTP answer with a JSON body comes back as a dict (``{"ok": bool, ...}`` plus ``http_status``), whether the
agent accepted the command or refused it (401, 403, 422, ...). Only transport failures (connection refused, timeout,
a non-JSON answer, an answer over ``max_answer_bytes``) and answers the agent did not sign raise
:class:`AgentError`: every request carries a fresh nonce, and the answer must come with a munge credential of the
agent's UID over the node's name, the status, that nonce and the body (:func:`wattsched.agent.auth.check_reply`), so
a process squatting the agent's port cannot pass for the agent. A failure to sign (munged down) raises
:class:`wattsched.agent.auth.MungeError`; both derive from :class:`~wattsched.errors.WattschedError`.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

from wattsched.agent.auth import HEADER, NONCE_HEADER, REPLY_HEADER, check_reply, run_command, sign_request
from wattsched.errors import WattschedError

__all__ = ["MAX_ANSWER_BYTES", "AgentClient", "AgentError", "read_bounded"]

MAX_ANSWER_BYTES = 1024 * 1024
"""The largest agent answer read (a state with a few hundred cpufreq policies is a few tens of KiB)."""


def read_bounded(response, limit: int, url: str, error: Callable[[str, str], Exception]) -> bytes:
    """At most ``limit`` bytes of ``response``; ``error(url, message)`` is raised if it holds more."""
    data = response.read(limit + 1)
    if len(data) > limit:
        raise error(url, f"answer larger than {limit} bytes: refused (the limit protects the daemon's memory)")
    return data


class AgentError(WattschedError):
    """The agent at ``url`` could not be reached or gave no usable answer."""

    def __init__(self, url: str, message: str):
        self.url = url
        super().__init__(f"{url}: {message}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The agent never redirects: a 3xx is an answer (refused unsigned), not somewhere to send a command."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_NO_REDIRECTS = urllib.request.build_opener(_NoRedirect)


class AgentClient:
    """Talks to one node agent.

    Parameters
    ----------
    url : str
        The agent's base URL, e.g. ``http://node1:9818``.
    node : str
        The node's name as its agent knows itself (the Slurm node name): commands are signed for this node only,
        and answers must be signed by its agent.
    munge_socket : path, optional
        munged's socket for signing (default: munge's own default).
    timeout_s : float
        Connect and read timeout of each request.
    agent_uids : set of int
        UIDs an answer's signature may carry: the agent runs as root.
    max_answer_bytes : int
        Larger answers are refused with :class:`AgentError`.
    run : callable
        Runs ``munge``/``unmunge`` (:func:`wattsched.agent.auth.run_command`; injected in tests).
    """

    def __init__(self, url: str, node: str, munge_socket: str | os.PathLike | None = None, timeout_s: float = 5, *,
                 agent_uids: frozenset[int] = frozenset({0}), max_answer_bytes: int = MAX_ANSWER_BYTES,
                 run: Callable[..., subprocess.CompletedProcess] = run_command):
        self.url = url.rstrip("/")
        self.node = node
        self.munge_socket = munge_socket
        self.timeout_s = timeout_s
        self.agent_uids = frozenset(agent_uids)
        self.max_answer_bytes = max_answer_bytes
        self.run = run

    def __repr__(self) -> str:
        return (f"AgentClient({self.url!r}, node={self.node!r}, munge_socket={self.munge_socket!r}, "
                f"timeout_s={self.timeout_s!r})")

    def set_cap(self, watts: float | None, package: int | None = None, request_id: str | None = None) -> dict:
        """Set a node cap of ``watts`` (split across packages), or one package's limit; ``None`` lifts it."""
        body: dict = {"watts": watts}
        if package is not None:
            body["package"] = package
        return self._post("/v1/cap", body, request_id)

    def set_freq(self, hz: float | None, request_id: str | None = None) -> dict:
        """Set the node's frequency ceiling in Hz; ``None`` restores the hardware maximum."""
        return self._post("/v1/freq", {"hz": hz}, request_id)

    def state(self) -> dict:
        """Packages (limits, energy) and frequencies as the agent reads them now."""
        return self._request("GET", "/v1/state", None, {})

    def _post(self, path: str, body: dict, request_id: str | None) -> dict:
        body["request_id"] = request_id or uuid.uuid4().hex
        data = json.dumps(body).encode()
        full_path = urlsplit(self.url).path + path
        headers = {"Content-Type": "application/json",
                   HEADER: sign_request("POST", full_path, data, self.munge_socket, node=self.node, run=self.run)}
        return self._request("POST", path, data, headers)

    def _request(self, method: str, path: str, data: bytes | None, headers: dict) -> dict:
        url = self.url + path
        nonce = secrets.token_hex(16)
        req = urllib.request.Request(url, data=data, headers={**headers, NONCE_HEADER: nonce}, method=method)
        try:
            with _NO_REDIRECTS.open(req, timeout=self.timeout_s) as resp:
                status, signature = resp.status, resp.headers.get(REPLY_HEADER)
                payload = read_bounded(resp, self.max_answer_bytes, url, AgentError)
        except urllib.error.HTTPError as exc:  # an answer: 4xx/5xx, returned as data if it is JSON
            with exc:
                status, signature = exc.code, exc.headers.get(REPLY_HEADER)
                payload = read_bounded(exc, self.max_answer_bytes, url, AgentError)
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
            raise AgentError(url, f"cannot reach the agent: {text}") from exc
        except TimeoutError as exc:
            raise AgentError(url, f"no answer within {self.timeout_s:g} s") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise AgentError(url, f"connection failed: {exc!r}") from exc
        problem = check_reply(signature, node=self.node, status=status, nonce=nonce, body=payload,
                              agent_uids=self.agent_uids, socket=self.munge_socket, run=self.run)
        if problem:
            raise AgentError(url, f"HTTP {status} refused: {problem}")
        try:
            answer = json.loads(payload)
        except ValueError:
            raise AgentError(url, f"HTTP {status} with a body that is not JSON: {payload[:200]!r}") from None
        if not isinstance(answer, dict):
            raise AgentError(url, f"HTTP {status} with unexpected JSON: {answer!r:.200}")
        answer["http_status"] = status
        return answer
