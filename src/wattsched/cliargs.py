"""Argument types and the parser class of the ``wattsched`` command line.

Every problem with an option is reported the way every other error is:
``wattsched: error: --option: message`` on standard error and exit status 2,
with a pointer to the command's ``--help`` (no usage block in between).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ["Parser", "finite_float", "int_in", "key_value", "positive_int", "seed"]

MAX_SEED = 2**32 - 1
"""Largest seed: numpy's legacy generators and many tools take 32-bit seeds."""


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors read ``wattsched: error: --option: message``."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument "):]
        for lead, what in (("unrecognized arguments: ", "unknown option or argument"),
                           ("the following arguments are required: ", "required")):
            if message.startswith(lead):
                message = f"{message[len(lead):]}: {what}"
        sys.stderr.write(f"wattsched: error: {message} (see `{self.prog} --help`)\n")
        sys.exit(2)


def int_in(low: int | None = None, high: int | None = None, what: str = "an integer") -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]`` (either bound may be open).

    >>> int_in(1, 10)("3")
    3
    """

    def convert(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            if high is None:
                bound = f">= {low:,}"
            elif low is None:
                bound = f"<= {high:,}"
            else:
                bound = f"between {low:,} and {high:,}"
            raise argparse.ArgumentTypeError(f"expected {what} {bound}, got {value}")
        return value

    convert.__name__ = "integer"
    return convert


positive_int = int_in(1, None, "a positive integer")
seed = int_in(0, MAX_SEED, "a seed")


def finite_float(low: float | None = 0.0, *, strict: bool = True, what: str = "a number") -> Callable[[str], float]:
    """An argparse type: a finite number above ``low`` (``strict``) or at least ``low``.

    >>> finite_float()("1.5")
    1.5
    """

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if low is not None and (value <= low if strict else value < low):
            raise argparse.ArgumentTypeError(f"expected {what} {'>' if strict else '>='} {low:g}, got {text}")
        return value

    convert.__name__ = "number"
    return convert


def key_value(text: str) -> tuple[str, object]:
    """``key=value`` with the value parsed as YAML (so numbers and booleans get their type).

    >>> key_value("order=saf"), key_value("lookahead=true"), key_value("x=3")
    (('order', 'saf'), ('lookahead', True), ('x', 3))
    """
    import argparse

    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        return key.strip(), value
