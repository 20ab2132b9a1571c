"""Retrying a failing call to a node or server: how often, how long, and when to give up.

`Retry.call` retries a call on `ServerError` with a doubling wait; a deadline bounds the call with its retries
(`time_left` tells a transport how long it may still wait, `answered` restarts the count); `stopping` gives a
thread's calls an event that ends their retries at once (a cancelled sync). Used by the index's sync and by
every wallet source.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .errors import ServerConfigError, ServerError


@dataclass(frozen=True)
class Retry:
    """How often a failing node call is tried again: `attempts` retries, waiting `delay` s, doubling.

    `report`, when given (a picklable function: workers retry too), is told of each retry in a line.
    `deadline`, when given, bounds a call with its retries: no retry starts once `deadline` seconds
    passed since the call began or since its last answer (`answered`), and the transports that read
    `time_left` wait no longer than that for a connection or a byte.
    """

    attempts: int = 5
    delay: float = 0.5
    report: Callable[[str], None] | None = None
    deadline: float | None = None

    def call(self, fn: Callable, *args: object, cancel: threading.Event | None = None):
        """fn(*args), retried on ServerError; the last ServerError is raised, a ServerConfigError at once, and at
        once too (no retry, no report) once `cancel` (default: the `stopping` event this runs under) is set: work
        its caller gave up on neither waits out its retries nor reports them. A call within a call keeps the
        outer one's deadline."""
        cancel = _CANCEL.get() if cancel is None else cancel
        deadline, token = _DEADLINE.get(), None
        if deadline is None and self.deadline is not None:
            deadline = _Deadline(self.deadline)
            token = _DEADLINE.set(deadline)
        try:
            wait, left = self.delay, self.attempts
            while True:
                try:
                    return fn(*args)
                except ServerConfigError:
                    raise
                except ServerError as exc:
                    if left == 0 or (cancel is not None and cancel.is_set()):
                        raise
                    if deadline is not None and deadline.end - time.monotonic() <= wait:
                        raise ServerError(f"{exc} (no answer for {deadline.seconds:g} s, retries included)") from None
                    if self.report is not None:
                        self.report(f"{exc}; retry {self.attempts - left + 1} of {self.attempts} in {wait:g} s")
                    if cancel is None:
                        time.sleep(wait)
                    elif cancel.wait(wait):
                        raise
                    wait, left = 2 * wait, left - 1
        finally:
            if token is not None:
                _DEADLINE.reset(token)


class _Deadline:
    """When the `Retry.call` running in this context gives up: `seconds` after it began or after its last answer."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds


_DEADLINE: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar("sp_scan_retry_deadline", default=None)


_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("sp_scan_retry_cancel", default=None)


@contextlib.contextmanager
def stopping(event: threading.Event | None) -> Iterator[None]:
    """Within the block, `Retry.call`s made in this thread without a `cancel` of their own give up once `event` is set
    (a wallet sync's cancel token)."""
    token = _CANCEL.set(event)
    try:
        yield
    finally:
        _CANCEL.reset(token)


def time_left(timeout: float) -> float:
    """How long a transport may wait for a connection or a byte: `timeout`, or less as the deadline of the
    `Retry.call` it runs in nears (a thousandth of a second once it passed: the wait then times out)."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    return max(min(timeout, deadline.end - time.monotonic()), 0.001)


def answered() -> None:
    """Tell the `Retry.call` this runs in that an answer came: its deadline counts again from now (a stream of
    answers that keeps coming is not given up on)."""
    deadline = _DEADLINE.get()
    if deadline is not None:
        deadline.end = time.monotonic() + deadline.seconds
