"""Client of the node agent: signed power commands and state, answers as data.

Every HTTP answer with a JSON body comes back as a dict (``{"ok": bool, ...}`` plus ``http_status``), whether the
agent accepted the command or refused it (401, 403, 422, ...). Only transport failures (connection refused, timeout,
a non-JSON answer) raise :class:`AgentError`. A failure to sign (munged down) raises
:class:`wattsched.agent.auth.MungeError`; both derive from :class:`~wattsched.errors.WattschedError`.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
import uuid
from urllib.parse import urlsplit

from wattsched.agent.auth import HEADER, sign_request
from wattsched.errors import WattschedError

__all__ = ["AgentClient", "AgentError"]


class AgentError(WattschedError):
    """The agent at ``url`` could not be reached or gave no usable answer."""

    def __init__(self, url: str, message: str):
        self.url = url
        super().__init__(f"{url}: {message}")


class AgentClient:
    """Talks to one node agent.

    Parameters
    ----------
    url : str
        The agent's base URL, e.g. ``http://node1:9818``.
    munge_socket : path, optional
        munged's socket for signing (default: munge's own default).
    timeout_s : float
        Connect and read timeout of each request.
    """

    def __init__(self, url: str, munge_socket: str | os.PathLike | None = None, timeout_s: float = 5):
        self.url = url.rstrip("/")
        self.munge_socket = munge_socket
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"AgentClient({self.url!r}, munge_socket={self.munge_socket!r}, timeout_s={self.timeout_s!r})"

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
                   HEADER: sign_request("POST", full_path, data, self.munge_socket)}
        return self._request("POST", path, data, headers)

    def _request(self, method: str, path: str, data: bytes | None, headers: dict) -> dict:
        url = self.url + path
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                status, payload = resp.status, resp.read()
        except urllib.error.HTTPError as exc:  # an answer: 4xx/5xx, returned as data if it is JSON
            status, payload = exc.code, exc.read()
            exc.close()
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
            raise AgentError(url, f"cannot reach the agent: {text}") from exc
        except TimeoutError as exc:
            raise AgentError(url, f"no answer within {self.timeout_s:g} s") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise AgentError(url, f"connection failed: {exc!r}") from exc
        try:
            answer = json.loads(payload)
        except ValueError:
            raise AgentError(url, f"HTTP {status} with a body that is not JSON: {payload[:200]!r}") from None
        if not isinstance(answer, dict):
            raise AgentError(url, f"HTTP {status} with unexpected JSON: {answer!r:.200}")
        answer["http_status"] = status
        return answer
