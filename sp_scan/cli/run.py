"""Running a command over block sources: in order, optionally in worker processes, with progress."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from sp_scan import block, wire
from sp_scan.errors import SPError
from sp_scan.scan import Receiver
from sp_scan.workers import Workers, signals_held

from . import output
from .options import EXIT_INTERRUPTED
from .sources import FileBlock, NodeBlock

BlockInput = FileBlock | NodeBlock


class Terminated(Exception):
    """SIGTERM during a sync."""


@contextlib.contextmanager
def stop_signals(what: str) -> Iterator[None]:
    """While a sync runs: the first Ctrl-C raises KeyboardInterrupt and the first SIGTERM `Terminated`, so
    the sync unwinds (its workers are killed) and can say where `what` ("the index") is; a second of either
    exits at once (130 or 143), `what` as of its last commit. The handlers before are restored after."""

    def exit_now(signum: int, frame: object) -> None:
        for child in multiprocessing.active_children():
            child.kill()
        sys.stderr.write(f"sp-scan: stopped at once; {what} is as of its last committed block (sync again to resume)\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    def on_stop(signum: int, frame: object) -> None:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, exit_now)
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated

    previous = {s: signal.signal(s, on_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stopped(exc: BaseException, where: str) -> int:
    """Say on stderr that a sync was interrupted (Ctrl-C) or stopped (SIGTERM) and where its file is
    ("the index is at height H"); return the exit status: 130 after Ctrl-C, 0 after SIGTERM."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    print(f"sp-scan: {'interrupted' if interrupted else 'stopped'}; {where} (sync again to resume)", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED if interrupted else 0


class Interrupted(Exception):
    """Ctrl-C during a run; `resume` is the height to restart from (--from), if a range."""

    def __init__(self, resume: int | None) -> None:
        super().__init__(resume)
        self.resume = resume


def work(source: BlockInput, mode: str, receiver: Receiver | None, fmt: output.Emitter) -> str:
    """Load one block and compute its records, formatted by `fmt`: "tweaks", "scan" (needs receiver) or "extract".

    Workers format their own lines, so the parent only writes them.

    Raises:
        SPError: the same type as the library raised, its message prefixed with the block's name.
        OSError: a file cannot be read.
    """
    try:
        raw, spent = source.load()
        try:
            if mode == "tweaks":
                records = [output.tweak_record(t) for t in block.tweaks(raw, spent)]
            elif mode == "scan":
                records = [output.match_record(m) for m in block.scan(raw, spent, receiver)]
            else:
                records = [output.input_record(r) for r in block.classify_inputs(raw, spent)]
            return fmt.text(records)
        except SPError:
            # The native block loop's messages are generic; the reference parser says where.
            wire.transactions(raw, spent)
            raise
    except SPError as exc:
        raise type(exc)(f"{source.name}: {exc}") from None


_worker_args: tuple[str, Receiver | None, output.Emitter | None] = ("tweaks", None, None)


def _init_worker(mode: str, receiver: Receiver | None, as_json: bool) -> None:
    global _worker_args
    _worker_args = (mode, receiver, output.Emitter(mode, as_json))


def _pool_work(source: BlockInput) -> str:
    return work(source, *_worker_args)


class Progress:
    """A one-line progress display (done/total, rate, ETA) rewritten in place on a terminal.

    Args:
        total: the number of blocks.
        stream: where to draw (stderr).
        enabled: draw nothing when False.
        clock: seconds, monotonic (injectable for tests).
    """

    def __init__(self, total: int, stream: TextIO, enabled: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.stream, self.enabled, self.clock = total, stream, enabled, clock
        self.start = clock()
        self.drawn = False

    def line(self, done: int, label: str) -> str:
        """The text shown after `done` blocks."""
        elapsed = max(self.clock() - self.start, 1e-9)
        rate = done / elapsed
        eta = (self.total - done) / rate if rate else 0.0
        minutes, seconds = divmod(int(eta + 0.5), 60)
        hours, minutes = divmod(minutes, 60)
        percent = 100 * done // self.total if self.total else 100
        return f"{done}/{self.total} blocks ({percent}%)  {rate:.2f} blocks/s  ETA {hours}:{minutes:02d}:{seconds:02d}  {label}"

    def update(self, done: int, label: str) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K" + self.line(done, label))
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def run(sources: Sequence[BlockInput], mode: str, receiver: Receiver | None, jobs: int, emit: output.Emitter) -> None:
    """Compute every source's records and emit them in source order.

    With jobs > 1, blocks are fetched and processed in that many worker
    processes; results are still emitted in order. A progress line is
    drawn on stderr when it is a terminal and there is more than one block.

    Raises:
        Interrupted: on Ctrl-C (the workers are killed: nothing waits for a block in flight).
        SPError, OSError: from `work`, likewise.
    """
    progress = Progress(len(sources), sys.stderr, len(sources) > 1 and sys.stderr.isatty())
    pool = None
    done = 0
    try:
        if jobs > 1 and len(sources) > 1:
            pool = Workers(min(jobs, len(sources)), _pool_work, _init_worker, (mode, receiver, emit.as_json))
            results = pool.in_order(sources, 2 * jobs)
        else:
            results = (work(s, mode, receiver, emit) for s in sources)
        for text in results:
            with signals_held():  # a block's lines and the resume height change together
                emit.block(text)
                done += 1
            progress.update(done, sources[done - 1].name)
    except KeyboardInterrupt:
        left = sources[done] if done < len(sources) else None
        raise Interrupted(left.height if isinstance(left, NodeBlock) else None) from None
    finally:
        progress.close()
        if pool is not None:
            pool.close()
