"""Running a command over block sources: in order, optionally in worker processes, with progress."""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from sp_scan import block, wire
from sp_scan.errors import SPError
from sp_scan.scan import Receiver
from sp_scan.workers import in_order, signals_held

from . import output
from .sources import FileBlock, NodeBlock

Source = FileBlock | NodeBlock


class Interrupted(Exception):
    """Ctrl-C during a run; `resume` is the height to restart from (--from), if a range."""

    def __init__(self, resume: int | None) -> None:
        super().__init__(resume)
        self.resume = resume


def work(source: Source, mode: str, receiver: Receiver | None, fmt: output.Emitter) -> str:
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
    # The parent handles Ctrl-C and closes the pool once its workers finish; they print no tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _worker_args
    _worker_args = (mode, receiver, output.Emitter(mode, as_json))


def _pool_work(source: Source) -> str:
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


def run(sources: Sequence[Source], mode: str, receiver: Receiver | None, jobs: int, emit: output.Emitter) -> None:
    """Compute every source's records and emit them in source order.

    With jobs > 1, blocks are fetched and processed in that many worker
    processes; results are still emitted in order. A progress line is
    drawn on stderr when it is a terminal and there is more than one block.

    Raises:
        Interrupted: on Ctrl-C, once the workers have finished the blocks they hold.
        SPError, OSError: from `work`, likewise.
    """
    progress = Progress(len(sources), sys.stderr, len(sources) > 1 and sys.stderr.isatty())
    pool = None
    done = 0
    try:
        if jobs > 1 and len(sources) > 1:
            initargs = (mode, receiver, emit.as_json)
            pool = multiprocessing.Pool(min(jobs, len(sources)), initializer=_init_worker, initargs=initargs)
            results = in_order(pool, _pool_work, sources, 2 * jobs)
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
            pool.join()
