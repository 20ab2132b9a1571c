"""Where the Electrum listener meets aiorpcx: the session base class, its framing, transport and JSON-RPC flavour.

aiorpcx (0.25) runs a connection as an `RPCSession`: a framer cuts the byte stream into lines, a
`JSONRPCConnection` turns a line into requests (one, or a batch), and a task per request awaits
`handle_request` and writes the reply. What the listener needs beyond that, and how it is had
through aiorpcx's public classes, attributes and overridable methods:

- error objects with `data` (Frigate's -32003 and -32000), and errors as electrs writes them (a
  string, `PlainError`): `_Json.error_payload`, the override point JSONRPCv2 itself uses;
- bounded queues per connection, as the HTTP listener has: the next line is read only while the
  connection's requests in flight (received, reply not yet handed to the socket) are below
  `max_in_flight` and its unsent bytes (messages waiting to be written, and the socket's buffer) are
  below `max_unsent`, and no request is served (its answer built) while they are not; meanwhile the
  framer (`_LineFramer`, our own) keeps what arrives and, once that holds a whole line and
  `HOLD_BYTES` or more, stops the socket's reading (`LineTransport`, the `transport` that aiorpcx's
  `serve_rs` takes) until the lines are taken;
- a line over `max_line` answered -32600 "request too large", then the connection closed; a line
  begun and not finished within `line_timeout` closes the connection (a slowloris);
- a client that does not read dropped once a message waits `max_send_delay` (aiorpcx's own setting:
  its `_send_message` aborts the connection and raises TaskTimeout, which `LineSession._send_message`
  catches and reports through `drop`, so no reply's task ends in an exception nobody retrieves);
- `after_reply(callback)`: work that starts only once the reply to the request being handled is
  written, so what it sends comes after that reply (a subscription's scan and its notifications).
  aiorpcx has no hook after a reply is written. The one contract relied on, kept to this module and
  checked by tests/test_electrum.py::test_aiorpcx_* (which fail if aiorpcx changes it): the message
  a request's `send_result` returns (its reply; for a batch, the whole batch's reply from its last
  item, None from the others) is passed to the session's `_send_message` and framed by the session's
  framer (`FramerBase.frame`) in the same task, just before it is written. `_Connection` wraps
  `send_result` per received line; the framer runs the line's callbacks (on the next loop turn) when
  it frames that line's reply, and `_send_message` counts the line's requests out of flight.
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar

from aiorpcx import JSONRPCConnection, JSONRPCv2, Notification, Request, RPCError, RPCSession, TaskTimeout, serve_rs
from aiorpcx.framing import FramerBase
from aiorpcx.rawsocket import RSTransport

log = logging.getLogger("sp_scan.server.electrum")

INVALID_REQUEST = -32600
HOLD_BYTES = 64 * 1024
"""Bytes received ahead of the line being read, a whole line among them, before the socket's reading stops."""


class _Reply:
    """The reply to one received line (a request or a batch): its requests, and the callbacks to run once it is written."""

    __slots__ = ("callbacks", "requests")

    def __init__(self, requests: int) -> None:
        self.callbacks: list = []
        self.requests = requests


_HANDLING: ContextVar[_Reply | None] = ContextVar("sp_scan_electrum_handling", default=None)
"""The reply of the line whose request the current task handles."""
_WRITING: ContextVar[_Reply | None] = ContextVar("sp_scan_electrum_writing", default=None)
"""The reply the current task writes next (set when its `send_result` returns a message)."""


class _SendResult:
    """A request's `send_result` (aiorpcx's: the reply message, or None from a batch item that is not
    the last to finish) that notes which line's reply the current task is about to write."""

    __slots__ = ("inner", "reply")

    def __init__(self, inner, reply: _Reply) -> None:
        self.inner, self.reply = inner, reply

    def __call__(self, result):
        message = self.inner(result)
        if message is not None:
            _WRITING.set(self.reply)
        return message


class _Connection(JSONRPCConnection):
    """JSON-RPC whose requests of one received line share a `_Reply`, counted into the session's in-flight requests."""

    def __init__(self, protocol, session: LineSession) -> None:
        super().__init__(protocol)
        self.session = session

    def receive_message(self, message):
        items = super().receive_message(message)
        requests = [item for item in items if isinstance(item, Request)]
        reply = _Reply(len(requests))
        for item in requests:
            item.send_result = _SendResult(item.send_result, reply)
        self.session.in_flight += len(items)  # a notification is in flight until handled
        return items


class PlainError(RPCError):
    """An error answered as electrs answers its errors: the message alone, a string where JSON-RPC has an object."""

    def __init__(self, message: str) -> None:
        super().__init__(-32000, message)


class _Json(JSONRPCv2):
    """JSON-RPC 2.0 whose error objects carry `data` when the error has it (Frigate's -32003, -32000);
    a `PlainError` is its message alone."""

    @classmethod
    def error_payload(cls, error, request_id):
        payload = super().error_payload(error, request_id)
        if isinstance(error, PlainError):
            payload["error"] = error.message
        elif getattr(error, "data", None) is not None:
            payload["error"]["data"] = error.data
        return payload


class _LineTooLong(Exception):
    """Ends the reading of a connection that sent a line over `max_line` bytes."""


class _LineStalled(Exception):
    """Ends the reading of a connection that began a line and did not finish it within `line_timeout`."""


class _LineFramer(FramerBase):
    """Newline framing: lines of at most `max_size` bytes, each finished within `line_timeout` of its
    first byte; runs a reply's `after_reply` callbacks once it frames that reply; stops the socket's
    reading (`hold(True)`) while it holds a whole line and `HOLD_BYTES` or more that nobody takes."""

    def __init__(self, max_size: int, line_timeout: float, loop: asyncio.AbstractEventLoop, hold) -> None:
        self.max_size, self.line_timeout, self.loop, self.hold = max_size, line_timeout, loop, hold
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._started: float | None = None  # when the unfinished line's first byte came
        self._arrived = asyncio.Event()
        self._held = False
        self._exception: BaseException | None = None

    def frame(self, message):
        reply = _WRITING.get()
        if reply is not None:
            _WRITING.set(None)
            for callback in reply.callbacks:
                self.loop.call_soon(callback)  # after this write
            reply.callbacks.clear()
        return message + b"\n"

    def received_bytes(self, data: bytes) -> None:
        if not self._buffer:
            self._started = self.loop.time()
        self._buffer += data
        self._arrived.set()
        if not self._held and self._backlogged():
            self._held = True
            self.hold(True)

    def _backlogged(self) -> bool:
        """True when a whole line and HOLD_BYTES or more wait, or more than a line may hold."""
        size = len(self._buffer)
        return size > self.max_size or (size >= HOLD_BYTES and self._buffer.find(b"\n", self._scanned) >= 0)

    def fail(self, exception: BaseException) -> None:
        self._exception = exception
        self._arrived.set()

    async def receive_message(self) -> bytes:
        """The next line without its newline.

        Raises:
            _LineTooLong: the line is over `max_size` bytes (the rest of it is not read).
            _LineStalled: the line was begun `line_timeout` seconds ago and is still not finished.
            the exception given to `fail`: the connection is lost (what it had sent is not answered).
        """
        while True:
            if self._exception is not None:
                raise self._exception
            at = self._buffer.find(b"\n", self._scanned)
            if 0 <= at <= self.max_size:
                line = bytes(self._buffer[:at])
                del self._buffer[: at + 1]
                self._scanned = 0
                self._started = self.loop.time() if self._buffer else None
                if self._held and not self._backlogged():
                    self._held = False
                    self.hold(False)
                return line
            if at > self.max_size or len(self._buffer) > self.max_size:
                raise _LineTooLong
            self._scanned = len(self._buffer)
            self._arrived.clear()
            if not self._buffer:
                await self._arrived.wait()
                continue
            try:
                async with asyncio.timeout_at(self._started + self.line_timeout):
                    await self._arrived.wait()
            except TimeoutError:
                raise _LineStalled from None


class LineTransport(RSTransport):
    """aiorpcx's transport whose socket reading also stops while the session's framer asks (`hold_reading`),
    not only while the socket's writing is paused."""

    def connection_made(self, transport) -> None:
        self.socket = transport
        self.reading_held = self.writing_paused = False
        super().connection_made(transport)

    def connection_lost(self, exc) -> None:
        super().connection_lost(exc)
        if self.session is not None:
            self.session.room_changed()  # what waits for room sees the connection closing

    def pause_writing(self) -> None:
        self.writing_paused = True
        super().pause_writing()

    def resume_writing(self) -> None:
        self.writing_paused = False
        super().resume_writing()  # resumes reading
        if self.reading_held:
            self.socket.pause_reading()
        self.session.room_changed()

    def hold_reading(self, hold: bool) -> None:
        self.reading_held = hold
        if hold:
            self.socket.pause_reading()
        elif not self.writing_paused and not self.socket.is_closing():
            self.socket.resume_reading()


async def serve_lines(session_factory, host: str, port: int, **kwargs):
    """aiorpcx's `serve_rs` with `LineTransport`: listen on host:port for `LineSession`s; returns the asyncio server."""
    return await serve_rs(session_factory, host, port, transport=LineTransport, **kwargs)


class LineSession(RPCSession):
    """A server connection speaking newline-delimited JSON-RPC 2.0 (see the module docstring), served by `serve_lines`.

    Subclasses implement `serve_request(request)` (a request's result, or raise RPCError), and set, before
    the connection starts: `max_line` (bytes of one line), `line_timeout` (seconds to finish a begun line),
    `max_send_delay` (seconds a message may wait for a client that does not read), `max_in_flight`
    (requests received and not yet answered before no further line is read) and `max_unsent` (bytes of
    messages waiting for the socket before no further line is read).
    """

    max_line = 1_000_000
    line_timeout = 10.0
    max_in_flight = 20
    max_unsent = 1 << 20

    def __init__(self, transport: LineTransport) -> None:
        super().__init__(transport, connection=_Connection(_Json, self))
        self._dropping = False
        self.in_flight = 0
        """Requests (and notifications) received whose reply is not yet handed to the socket (or which are not yet handled)."""
        self._waiting = 0  # bytes of messages waiting to be written
        self._room = asyncio.Event()

    def default_framer(self):
        return _LineFramer(self.max_line, self.line_timeout, self.loop, self.transport.hold_reading)

    async def serve_request(self, request):
        raise NotImplementedError

    async def handle_request(self, request):
        send_result = getattr(request, "send_result", None)
        _HANDLING.set(send_result.reply if isinstance(send_result, _SendResult) else None)
        try:
            while self.unsent() >= self.max_unsent and not self.is_closing():
                await self._wait_for_room()
            if self.is_closing():
                return None  # dropped meanwhile: nothing to build
            return await self.serve_request(request)
        finally:
            if isinstance(request, Notification):
                self._out_of_flight(1)

    async def _send_message(self, message):
        """aiorpcx's writer of every message (a reply's, a notification's): the bytes counted while they wait;
        a client that does not read for `max_send_delay` is dropped (aiorpcx aborted it) instead of raising."""
        reply, size = _WRITING.get(), len(message)
        self._waiting += size
        try:
            return await super()._send_message(message)
        except TaskTimeout:
            self._not_reading()
            return None
        finally:
            self._waiting -= size
            self._out_of_flight(reply.requests if reply is not None else 0)

    def _out_of_flight(self, count: int) -> None:
        self.in_flight -= count
        self.room_changed()

    def room_changed(self) -> None:
        """Wake whatever waits for the connection's queues to shrink."""
        self._room.set()

    async def _wait_for_room(self) -> None:
        """Wait until the queues may have shrunk; drop the client when its unsent bytes did not shrink
        for `max_send_delay` (it does not read)."""
        before = self.unsent()
        self._room.clear()
        try:
            async with asyncio.timeout(self.max_send_delay):
                await self._room.wait()
        except TimeoutError:
            if self.unsent() >= before:
                self._not_reading()

    def _not_reading(self) -> None:
        if not self._dropping:
            self.drop("it does not read what it is sent")

    def unsent(self) -> int:
        """Bytes of messages waiting to be written and in the socket's buffer."""
        return self._waiting + self.transport.socket.get_write_buffer_size()

    def has_room(self) -> bool:
        """True while the next line may be read (requests in flight and bytes unsent below their caps)."""
        return self.in_flight < self.max_in_flight and self.unsent() < self.max_unsent

    def after_reply(self, callback) -> None:
        """Run `callback` once the reply to the request being handled has been written (for a request
        in a batch: the batch's reply), on the next loop turn; at once for a notification (no reply)."""
        reply = _HANDLING.get()
        if reply is None:
            self.loop.call_soon(callback)
        else:
            reply.callbacks.append(callback)

    async def process_messages(self, recv_message):
        async def receive():
            while not self.has_room() and not self.is_closing():
                await self._wait_for_room()
            try:
                return await recv_message()
            except _LineTooLong:  # the rest of the line is not read
                await self._refuse_line()
                self.loop.create_task(self.close(force_after=1))  # a task: close() waits for this loop to end
                raise
            except _LineStalled:
                log.info("electrum: closing %s: a line begun %g s ago is not finished", self.remote_address(), self.line_timeout)
                self.loop.create_task(self.abort())
                raise

        try:
            await super().process_messages(receive)
        except (_LineTooLong, _LineStalled):
            pass

    async def _refuse_line(self) -> None:
        message = _Json.response_message(RPCError(INVALID_REQUEST, "request too large"), None)
        try:
            async with asyncio.timeout(self.max_send_delay):
                await self.transport.write(message)
        except TimeoutError:
            pass

    def drop(self, why: str) -> None:
        """Abort the connection of a client that does not read, with one log line (later calls do nothing)."""
        if not self._dropping:
            self._dropping = True
            log.info("electrum: disconnecting %s: %s", self.remote_address(), why)
            self.loop.create_task(self.abort())
