"""Worker processes in order that stop at once, and steps that Ctrl-C must not cut (sp_scan.workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from sp_scan.workers import WorkerDiedError, Workers, signals_held


def square(x: int) -> int:
    return x * x


def hang_on_minus_one(x: int) -> int:
    """x squared; -1 waits forever (a worker stuck in a call that never returns)."""
    if x == -1:
        threading.Event().wait()
    if x == -2:
        os.kill(os.getpid(), signal.SIGKILL)
    if x == -3:
        raise LookupError("no such item")
    return x * x


HELD = threading.Lock()
"""Held by a thread of the test process while workers start (see the test below)."""


def lock_is_free(_: object) -> bool:
    """Whether this process can take HELD. The timeout only bounds a failure: a free lock is taken at once."""
    taken = HELD.acquire(timeout=30)
    if taken:
        HELD.release()
    return taken


def test_in_order_yields_every_result_in_item_order():
    with Workers(2, square) as workers:
        assert list(workers.in_order(range(20), 3)) == [x * x for x in range(20)]
        assert list(workers.in_order(range(5), 1)) == [x * x for x in range(5)]


def test_an_in_order_stopped_early_leaves_its_answers_to_be_skipped_by_the_next():
    with Workers(3, square) as workers:
        first = workers.in_order(range(100), 7)
        assert [next(first), next(first)] == [0, 1]
        first.close()  # seven items given out and not yet read
        assert list(workers.in_order(range(100, 110), 4)) == [x * x for x in range(100, 110)]


def test_an_exception_in_a_worker_is_raised_in_the_parent_with_its_type_and_the_workers_go_on():
    with Workers(2, hang_on_minus_one) as workers:
        with pytest.raises(LookupError, match="no such item"):
            list(workers.in_order([1, 2, -3, 4, 5], 4))
        assert list(workers.in_order([6, 7, 8], 2)) == [36, 49, 64]


def test_a_worker_that_dies_is_an_error_not_a_wait():
    with Workers(2, hang_on_minus_one) as workers:
        with pytest.raises(WorkerDiedError, match="died"):
            list(workers.in_order([1, -2, 3, 4], 2))


def test_closing_kills_workers_stuck_in_a_call_that_never_returns():
    workers = Workers(2, hang_on_minus_one)
    results = workers.in_order([1, -1, -1, 4], 4)
    assert next(results) == 1
    pids = [p.pid for p in workers._procs]
    closer = threading.Thread(target=workers.close, daemon=True)
    closer.start()
    closer.join(timeout=60)  # a failure bound, not a timing: close must not wait for the stuck calls
    assert not closer.is_alive(), "close() waited for a worker stuck in its call"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # reaped: no such process


def test_workers_are_forked_only_from_a_single_threaded_process():
    code = (
        "import threading\n"
        "from sp_scan import workers\n"
        "print(workers.start_method())\n"
        "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "print(workers.start_method())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["fork", "forkserver"]


def test_workers_do_not_inherit_a_lock_another_thread_holds():
    # A fork of this process would copy HELD as locked, by a thread the copy does not have: it would
    # wait forever (as an allocator's lock made a forked worker under AddressSanitizer do).
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with HELD:
            taken.set()
            release.wait()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    taken.wait()
    try:
        with Workers(2, lock_is_free) as workers:
            assert list(workers.in_order(range(4), 4)) == [True] * 4
    finally:
        release.set()
        holder.join()


def test_signals_held_delivers_ctrl_c_after_the_block_not_inside_it():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            signal.raise_signal(signal.SIGINT)
            steps.append("after the signal, still inside")
    assert steps == ["after the signal, still inside"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_signals_held_leaves_other_threads_alone():
    seen = []

    def worker():
        with signals_held():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]
