"""Worker processes in order, and steps that Ctrl-C or SIGTERM must not cut in two.

Python raises KeyboardInterrupt (or runs a SIGTERM handler) between any two bytecodes. Two
places must not be cut: a `multiprocessing.Pool` submission (cut after the pool has filed a task
but before it has queued it, closing and joining the pool waits forever for that task), and
writes that must change together (a block's output and the height to resume from).
`signals_held` keeps them whole; `in_order` submits that way.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import multiprocessing.pool
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs; then deliver those that came, to the handlers
    in place before (so KeyboardInterrupt is raised, or the process ends, right after the block).

    Only the main thread receives signals in Python: elsewhere this holds nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {}
    for signum in _HELD:
        handler = signal.getsignal(signum)
        if handler is not None:  # None: set from C, cannot be put back from Python
            previous[signum] = signal.signal(signum, lambda s, frame: came.append(s))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


def in_order(pool: multiprocessing.pool.Pool, fn: Callable[[T], R], items: Iterable[T], ahead: int) -> Iterator[R]:
    """fn(item) for each item, run in `pool` and yielded in item order, at most `ahead` queued or running.

    Every task the pool accepts is queued before an interrupt can land, so a caller that stops
    early (Ctrl-C, an error) can close and join the pool: the workers finish the tasks they
    hold. (Terminating instead can deadlock when a worker holds a queue's lock.)

    Raises:
        whatever fn raised for the item being yielded.
    """
    pending: collections.deque = collections.deque()
    rest = iter(items)

    def submit(item: T) -> None:
        with signals_held():
            pending.append(pool.apply_async(fn, (item,)))

    for item in itertools.islice(rest, ahead):
        submit(item)
    while pending:
        result = pending[0].get()
        pending.popleft()
        for item in itertools.islice(rest, 1):
            submit(item)
        yield result
