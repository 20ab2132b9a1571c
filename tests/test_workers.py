"""Worker pools in order, and steps that Ctrl-C must not cut (sp_scan.workers)."""

from __future__ import annotations

import multiprocessing
import signal
import threading

import pytest

from sp_scan.workers import in_order, signals_held


def square(x: int) -> int:
    return x * x


def test_in_order_yields_every_result_in_item_order():
    with multiprocessing.Pool(2) as pool:
        assert list(in_order(pool, square, range(20), 3)) == [x * x for x in range(20)]


def test_ctrl_c_inside_a_submission_leaves_a_pool_that_closes_and_joins():
    # The race seen as a hung `--jobs 2` Ctrl-C test: the interrupt lands after the pool has filed a
    # task but before it queued it, so join() would wait for that task forever.
    pool = multiprocessing.Pool(2)

    class InterruptedQueue:
        """The pool's task queue, with Ctrl-C arriving just before the third task is queued."""

        def __init__(self, queue) -> None:
            self.queue, self.calls = queue, 0

        def put(self, item) -> None:
            self.calls += 1
            if self.calls == 3:
                signal.raise_signal(signal.SIGINT)
            self.queue.put(item)

    pool._taskqueue = InterruptedQueue(pool._taskqueue)  # apply_async files the task, then puts it here
    results = in_order(pool, square, range(10), 2)
    with pytest.raises(KeyboardInterrupt):
        list(results)
    pool.close()
    joiner = threading.Thread(target=pool.join, daemon=True)
    joiner.start()
    joiner.join(timeout=30)
    assert not joiner.is_alive(), "the pool did not join: a task was filed but never queued"


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
