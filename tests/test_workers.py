"""Worker processes in order that stop at once, threads working ahead, and steps that Ctrl-C must not cut (sp_scan.workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from index_support import wait_until
from sp_scan.errors import ServerError
from sp_scan.retry import Retry
from sp_scan.workers import Ahead, AheadPool, WorkerDiedError, Workers, signals_held


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


class Recorder:
    """fn for Ahead: records the items it starts, and blocks on an item's gate when one is set."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.gates: dict[int, threading.Event] = {}
        self.began: dict[int, threading.Event] = {}

    def __call__(self, x: int) -> int:
        self.started.append(x)
        self.began.setdefault(x, threading.Event()).set()
        if x in self.gates:
            self.gates[x].wait()
        if x == -3:
            raise LookupError("no such item")
        return x * x


def test_ahead_yields_every_answer_in_item_order():
    assert list(Ahead(square, range(50), 2, threading.Event())) == [x * x for x in range(50)]
    assert list(Ahead(square, [], 2, threading.Event())) == []


def test_ahead_computes_at_most_ahead_answers_the_caller_has_not_taken():
    fn = Recorder()
    fn.began[2] = threading.Event()
    fn.gates[3] = threading.Event()
    ahead = Ahead(fn, range(10), 2, threading.Event())
    assert next(ahead) == 0  # taken: a slot frees, and item 2 starts
    fn.began[2].wait()
    assert fn.started == [0, 1, 2]  # 1 and 2 computed or computing, not taken: 3 waits for a slot
    assert [next(ahead), next(ahead)] == [1, 4]
    fn.gates[3].set()
    assert list(ahead) == [x * x for x in range(3, 10)]


def test_ahead_raises_the_error_of_the_item_taken_with_its_type_and_computes_nothing_after_it():
    fn = Recorder()
    ahead = Ahead(fn, [1, 2, -3, 4, 5], 4, threading.Event())
    assert [next(ahead), next(ahead)] == [1, 4]
    with pytest.raises(LookupError, match="no such item"):
        next(ahead)
    with pytest.raises(LookupError):
        next(ahead)  # again: the iterator stays at its error
    assert fn.started == [1, 2, -3]


def test_ahead_closed_without_waiting_returns_while_the_item_in_hand_still_runs():
    fn = Recorder()
    fn.began[1], fn.gates[1] = threading.Event(), threading.Event()
    stop = threading.Event()
    ahead = Ahead(fn, range(1, 100), 2, stop)
    fn.began[1].wait()
    ahead.close()  # item 1 has not returned: the stop does not wait for it
    assert stop.is_set()
    fn.gates[1].set()
    ahead.close(wait=True)
    assert not ahead._thread.is_alive()
    assert fn.started == [1]  # nothing starts after the stop


def test_ahead_pool_work_in_flight_gives_up_its_retries_at_once_when_closed():
    reported = []
    retry = Retry(attempts=50, delay=3600.0, report=reported.append)  # an hour between tries: only `stop` ends it

    def failing(stop):
        raise ServerError("the server went away")

    pool = AheadPool(2, "test-ahead")
    future = pool.submit(lambda stop: retry.call(failing, stop, cancel=stop), pool.stop)
    wait_until(lambda: reported, what="the first retry")
    pool.close()
    assert isinstance(future.exception(timeout=300), ServerError)  # the bound only turns a hang into a failure
    assert len(reported) == 1


def test_ahead_pool_closed_with_wait_returns_once_the_work_in_hand_ends_and_cancels_the_rest():
    started, gate = threading.Event(), threading.Event()
    pool = AheadPool(1, "test-ahead")
    running = pool.submit(lambda: (started.set(), gate.wait(300))[1])
    queued = pool.submit(square, 3)
    assert started.wait(300)
    closer = threading.Thread(target=pool.close, kwargs={"wait": True})
    closer.start()
    wait_until(queued.cancelled, what="the queued work cancelled")
    assert closer.is_alive() and pool.stop.is_set()  # it waits for the running work only
    gate.set()
    closer.join(300)
    assert not closer.is_alive() and running.result() is True


def test_both_read_ahead_shapes_leave_ctrl_c_and_sigterm_to_the_main_thread():
    def mask(_=None):
        return signal.pthread_sigmask(signal.SIG_BLOCK, [])

    ahead = Ahead(mask, [0], 1, threading.Event())
    pool = AheadPool(1, "test-mask")
    try:
        for held in (next(ahead), pool.submit(mask).result(timeout=60)):
            assert {signal.SIGINT, signal.SIGTERM} <= held
    finally:
        ahead.close()
        pool.close()
    assert signal.SIGINT not in mask()


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


OWNER = """
import sys, threading
from test_workers import hang_on_minus_one
from sp_scan.workers import Workers, start_method
if __name__ == "__main__":
    if sys.argv[1] == "forkserver":
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    results = Workers(2, hang_on_minus_one).in_order([1, -1, 3], 3)  # the second worker hangs in its call
    assert next(results) == 1 and start_method() == sys.argv[1]
    print("started", flush=True)
    threading.Event().wait()
"""


def _state(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process from Linux's /proc, or None once it is gone."""
    try:
        state, ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
    except (OSError, IndexError, ValueError):
        return None
    return state, int(ppid)


def descendants(pid: int) -> list[int]:
    """The pids of the process's running descendants (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        got = _state(int(entry.name)) if entry.name.isdigit() else None
        if got is not None and got[0] != "Z":
            children.setdefault(got[1], []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def running(pid: int) -> bool:
    """Whether the process still runs (a zombie has ended)."""
    got = _state(pid)
    return got is not None and got[0] != "Z"


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_workers_and_their_fork_server_end_when_the_owner_is_killed(method):
    # kill -9 runs no cleanup: a worker stuck in a call, or a fork server its workers keep alive, would hold
    # the owner's files (an index and its -wal) for as long as the call lasts.
    here = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, method], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert owner.stdout.readline() == "started\n"
        made = descendants(owner.pid)
    finally:
        owner.kill()
        owner.wait()
        owner.stdout.close()  # not read to its end: the workers hold it too
    assert len(made) >= 2  # the workers (and, with a fork server, the server and its resource tracker)
    deadline = time.monotonic() + 60  # a failure bound only: the hung call never returns
    try:
        while left := [pid for pid in made if running(pid)]:
            assert time.monotonic() < deadline, f"{len(left)} of the {len(made)} processes the killed owner made still run"
            time.sleep(0.05)
    finally:
        for pid in made:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


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
