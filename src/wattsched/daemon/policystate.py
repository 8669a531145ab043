"""Policy state in the state store: saved after every decision, restored at start and kept across SIGHUP.

A policy's state object (from ``Policy.init_state()``) is saved as JSON under
the key ``policy_state`` together with the policy's name and parameters; it is
restored only for the same policy with the same parameters (anything else
starts fresh state, and the daemon says so in its log). A typed state (a
pydantic model or a dataclass) round-trips through its own fields; a plain
dict keeps the entries that are JSON values (per-call caches such as a
memo of the last decision are not state and are dropped).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

log = logging.getLogger("wattsched.daemon")

KEY = "policy_state"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True


def encode_state(state: Any) -> Any:
    """A JSON value for ``state``.

    >>> encode_state({"used_j": 5.0, "memo": object()})
    {'used_j': 5.0}
    """
    if state is None:
        return None
    dump = getattr(state, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {k: v for k, v in dataclasses.asdict(state).items() if _jsonable(v)}
    if isinstance(state, dict):
        return {str(k): v for k, v in state.items() if _jsonable(v)}
    return None


def decode_state(fresh: Any, saved: Any) -> Any:
    """``saved`` (from :func:`encode_state`) as an object of the same kind as ``fresh``.

    >>> decode_state({}, {"used_j": 5.0})
    {'used_j': 5.0}
    """
    if saved is None:
        return fresh
    validate = getattr(type(fresh), "model_validate", None)
    if callable(validate):
        return validate(saved)
    if dataclasses.is_dataclass(fresh) and not isinstance(fresh, type):
        names = {f.name for f in dataclasses.fields(fresh)}
        return dataclasses.replace(fresh, **{k: v for k, v in saved.items() if k in names})
    if isinstance(fresh, dict) and isinstance(saved, dict):
        out = dict(fresh)
        out.update(saved)
        return out
    return fresh


def restore(store, policy, name: str, params: dict) -> Any:
    """The saved state of policy ``name`` with ``params``, or fresh state (logged when something was dropped)."""
    fresh = policy.init_state()
    saved = store.get(KEY)
    if not saved:
        return fresh
    if saved.get("policy") != name or saved.get("params") != _params(params):
        log.info("policy state of %s %s not restored: the policy is now %s %s; starting fresh state",
                 saved.get("policy"), saved.get("params"), name, _params(params))
        return fresh
    try:
        state = decode_state(fresh, saved.get("state"))
    except Exception as exc:  # a state saved by another version of the policy
        log.warning("policy state of %s could not be restored (%s); starting fresh state", name, exc)
        return fresh
    log.info("policy state of %s restored from the state store", name)
    return state


def save(store, name: str, params: dict, state: Any) -> None:
    store.put(KEY, {"policy": name, "params": _params(params), "state": encode_state(state)})


def _params(params: dict) -> dict:
    return json.loads(json.dumps(params, default=str, sort_keys=True))
