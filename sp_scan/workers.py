"""Worker processes that answer in order and stop at once, threads that work ahead of their caller (`Ahead`,
`AheadPool`), and steps that Ctrl-C or SIGTERM must not cut in two.

`Workers` runs one function over items in worker processes, each worker with its own pipe, so
that no lock is shared between processes: any worker can be killed at any moment (a stop
whatever the node does: one stuck in a network call included) without leaving another waiting,
and a worker that dies is an error, never a wait. Workers end with the process that made them, even
when it is killed (kill -9): none is left holding its files. Python raises KeyboardInterrupt (or runs a
SIGTERM handler) between any two bytecodes; writes that must change together (a block's output
and the height to resume from) are kept whole by `signals_held`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import ctypes
import itertools
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")
_HELD = (signal.SIGINT, signal.SIGTERM)
JOIN_TIMEOUT = 5.0
"""Seconds `Workers.close` waits for a killed worker to be reaped."""
_PR_SET_PDEATHSIG = 1


def start_method() -> str:
    """How the next `Workers` start: "fork" while this process runs a single thread (workers then share
    its imports: no start-up cost), else "forkserver" ("spawn" where there is none).

    A fork of a process with other threads copies the locks those threads hold (an HTTP server's, a
    node library's or pyzmq's threads, the allocator's) and the child can wait on them forever. Threads
    are counted in /proc/self/task; without it (not Linux) the answer is never "fork". A server or spawn
    start imports the main script again in each worker: a script that starts workers needs
    `if __name__ == "__main__":`.
    """
    methods = multiprocessing.get_all_start_methods()
    try:
        alone = len(os.listdir("/proc/self/task")) == 1
    except OSError:
        alone = False
    if alone and "fork" in methods:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


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


def signals_to_the_main_thread() -> None:
    """Block SIGINT and SIGTERM in the calling thread (a helper thread's first call): the kernel then gives
    them to the main thread, whose blocking call they interrupt so that Python runs the handlers at once;
    taken by another thread, they would wait for the main thread's call to return (a node that hangs)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)


class Ahead(Generic[T, R]):
    """fn(item) for each item, computed in one thread while the caller works on the answers before; an iterator
    of the answers in item order, at most `ahead` computed and not yet taken. For items known in advance;
    work the caller decides as it goes is `AheadPool`'s.

    The overlap pays when fn releases the GIL for its long parts (the C stages and SQLite do).

    Raises (from next):
        whatever fn raised for the item being taken (its type kept); nothing is computed after it.
    """

    def __init__(self, fn: Callable[[T], R], items: Iterable[T], ahead: int, stop: threading.Event) -> None:
        """`stop` is set by `close`: fn may watch it to give up a wait (a retry's)."""
        self.stop = stop
        self._slots = threading.Semaphore(max(1, ahead))
        self._answers: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, args=(fn, iter(items)), name="sp-scan-ahead", daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[T], R], items: Iterator[T]) -> None:
        signals_to_the_main_thread()
        for item in items:
            self._slots.acquire()
            if self.stop.is_set():
                return
            try:
                answer = (True, fn(item))
            except BaseException as exc:  # noqa: BLE001  (raised in the caller's thread)
                self._answers.put((False, exc))
                return
            self._answers.put(answer)
        self._answers.put(None)

    def __iter__(self) -> Ahead[T, R]:
        return self

    def __next__(self) -> R:
        answer = self._answers.get()
        if answer is None:
            self._answers.put(None)
            raise StopIteration
        self._slots.release()
        ok, result = answer
        if not ok:
            self._answers.put((False, result))
            raise result
        return result

    def close(self, wait: bool = False) -> None:
        """Stop computing; with `wait`, return once fn is no longer running (after the item in hand), else at
        once (the daemon thread ends after it: a stop never waits for a node that does not answer)."""
        self.stop.set()
        self._slots.release()
        if wait:
            self._thread.join()


class AheadPool:
    """Work given as the caller goes, done ahead of it in daemon threads: `submit` gives a Future. For work
    decided one step at a time or spread over threads (a wallet source's requests, the Electrum scan's next
    partition); a list of items known in advance, answered in order by one thread, is `Ahead`'s. `close`
    cancels what has not started and sets `stop`, which running work passes to `Retry.call` so that it gives
    up instead of retrying. Nothing waits for a server: not `close` (unless told to wait), not the process's exit.

    Args:
        threads: the worker threads (started now, ended by `close`).
        name: their thread names' prefix.
    """

    def __init__(self, threads: int, name: str) -> None:
        self.stop = threading.Event()
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable, *args: object) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._tasks.put((future, fn, args))
        return future

    def _run(self) -> None:
        signals_to_the_main_thread()
        while (task := self._tasks.get()) is not None:
            future, fn, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001  (handed to whoever waits on the future)
                future.set_exception(exc)

    def close(self, wait: bool = False) -> None:
        """Cancel what has not started and set `stop`; with `wait`, return once the threads have ended (after the
        work in hand: for a caller that closes what that work uses), else at once."""
        self.stop.set()
        while True:
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task[0].cancel()
        for _ in self._threads:
            self._tasks.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


class WorkerDiedError(ChildProcessError):
    """A worker process ended while it held an item (killed, out of memory)."""


def _end_with_owner(owner_is_parent: bool) -> None:
    """End this worker when the process that made it ends, whatever the worker is doing then.

    On Linux the kernel kills the worker when its parent ends (PR_SET_PDEATHSIG). That parent is the
    owner when `owner_is_parent` (a fork by its only thread, so by its main thread; or a spawn), else the
    fork server, which lives as long as any worker it made (each holds the server's lifeline): so a
    thread also waits on the owner's sentinel and ends the worker, and the server then ends too. Where
    there is no prctl, that thread is the watch.

    Raises:
        OSError: prctl refused.
    """
    owner = multiprocessing.parent_process()
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if owner_is_parent and os.getppid() != owner.pid:  # the owner ended before prctl
            os._exit(1)
    threading.Thread(target=lambda: (owner.join(), os._exit(1)), name="sp-scan-owner-watch", daemon=True).start()


def _serve(conn: multiprocessing.connection.Connection, owner_is_parent: bool, fn: Callable, initializer: Callable | None, initargs: tuple) -> None:
    """A worker's loop: answer each item read from `conn` with (True, fn(item)) or (False, the exception)."""
    # A terminal's Ctrl-C reaches the whole process group: the parent decides. SIGTERM ends a worker at once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _end_with_owner(owner_is_parent)
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            item = conn.recv()
        except (EOFError, ConnectionResetError):  # the parent closed its end (or ended): done
            return
        try:
            answer = (True, fn(item))
        except Exception as exc:  # noqa: BLE001  (re-raised in the parent)
            answer = (False, exc)
        try:
            conn.send(answer)
        except (BrokenPipeError, ConnectionResetError):  # the parent ended
            return
        except Exception as exc:  # noqa: BLE001  (an answer that does not pickle)
            conn.send((False, RuntimeError(f"a worker's answer could not be sent back: {type(exc).__name__}: {exc}")))


class Workers(Generic[T, R]):
    """`n` worker processes computing fn(item); results come back in item order (see `in_order`).

    Item k goes to worker k mod n, and each worker answers in the order it was given items, so
    results are read in order from one worker's pipe at a time. `close` (or leaving `with`) kills
    the workers whatever they are doing and reaps them: a stop never waits for a worker's task.

    Args:
        n: worker processes, >= 1.
        fn: a picklable function of one item (it is sent to each worker once, not with every item).
        initializer, initargs: picklable; called in each worker before its first item.
    """

    def __init__(self, n: int, fn: Callable[[T], R], initializer: Callable | None = None, initargs: tuple = ()) -> None:
        if n < 1:
            raise ValueError(f"workers must be >= 1, not {n}")
        self._conns: list[multiprocessing.connection.Connection] = []
        self._procs: list[multiprocessing.Process] = []
        self._stale = [0] * n  # answers still to come for items of an abandoned `in_order`
        method = start_method()
        start = multiprocessing.get_context(method)
        if method == "forkserver":  # its server imports these once, when the first pool starts it
            start.set_forkserver_preload([getattr(f, "func", f).__module__ for f in (fn, initializer) if f is not None])
        try:
            for _ in range(n):
                ours, theirs = start.Pipe()
                proc = start.Process(target=_serve, args=(theirs, method != "forkserver", fn, initializer, initargs), daemon=True)
                proc.start()
                theirs.close()
                self._conns.append(ours)
                self._procs.append(proc)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Workers[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _answer(self, w: int) -> tuple[bool, R | Exception]:
        """The next (ok, result or exception) of worker `w`, its stale answers skipped.

        Raises:
            WorkerDiedError: the worker ended.
        """
        conn = self._conns[w]
        while True:
            try:
                ok, value = conn.recv()
            except EOFError:
                self._procs[w].join(JOIN_TIMEOUT)
                raise WorkerDiedError(f"a worker process died while computing (exit status {self._procs[w].exitcode})") from None
            if self._stale[w]:
                self._stale[w] -= 1
                continue
            return ok, value

    def in_order(self, items: Iterable[T], ahead: int) -> Iterator[R]:
        """fn(item) for each item, yielded in item order, at most `ahead` items given out and not yet yielded.

        Stopping early (closing the iterator, an error) leaves the workers usable: answers still to
        come for this call's items are skipped by the next call.

        Raises:
            whatever fn raised for the item being yielded (its type kept);
            WorkerDiedError: the worker holding the item ended.
        """
        n = len(self._procs)
        pending: collections.deque[int] = collections.deque()
        counter = itertools.count()
        rest = iter(items)

        def give(item: T) -> None:
            w = next(counter) % n
            try:
                self._conns[w].send(item)
            except (BrokenPipeError, ConnectionResetError):
                self._procs[w].join(JOIN_TIMEOUT)
                raise WorkerDiedError(f"a worker process died (exit status {self._procs[w].exitcode})") from None
            pending.append(w)

        try:
            for item in itertools.islice(rest, max(1, ahead)):
                give(item)
            while pending:
                ok, result = self._answer(pending[0])  # an interrupt here leaves the answer to come: stale
                pending.popleft()
                if not ok:
                    raise result
                for item in itertools.islice(rest, 1):
                    give(item)
                yield result
        finally:
            for w in pending:
                self._stale[w] += 1

    def close(self) -> None:
        """Kill the workers (whatever they are doing) and reap them, within about JOIN_TIMEOUT seconds."""
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
        for proc in self._procs:
            proc.join(JOIN_TIMEOUT)
        self._conns, self._procs = [], []
