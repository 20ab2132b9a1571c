"""Where the Electrum listener meets aiorpcx: the session base class, its framing and JSON-RPC flavour.

aiorpcx (0.25) runs a connection as an `RPCSession`: a framer cuts the byte stream into lines, a
`JSONRPCConnection` turns a line into requests (one, or a batch), and a task per request awaits
`handle_request` and writes the reply. What the listener needs beyond that, and how it is had
through aiorpcx's public classes, attributes and overridable methods:

- error objects with `data` (Frigate's -32003 and -32000): `_Json.error_payload`, the override point
  JSONRPCv2 itself uses;
- a line over `max_line` answered -32600 "request too large", then the connection closed (aiorpcx's
  `NewlineFramer` raises MemoryError for such a line and its session reads on): the `receive`
  function given to `RPCSession.process_messages` answers and ends the reading with `_LineTooLong`;
- a client that does not read dropped once a message waits `max_send_delay` (aiorpcx's own setting:
  it aborts the connection and raises TaskTimeout, which `process_messages` and the subclass's
  writers catch and report through `drop`);
- `after_reply(callback)`: work that starts only once the reply to the request being handled is
  written, so what it sends comes after that reply (a subscription's scan and its notifications).
  aiorpcx has no hook after a reply is written. The one contract relied on, kept to this module and
  checked by tests/test_electrum.py::test_aiorpcx_* (which fail if aiorpcx changes it): the message
  a request's `send_result` returns (its reply; for a batch, the whole batch's reply from its last
  item, None from the others) is framed by the session's framer (`FramerBase.frame`) in the same
  task, just before it is written. `_Connection` wraps `send_result` per received line; the framer
  runs the line's callbacks (on the next loop turn) when it frames that line's reply.
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar

from aiorpcx import JSONRPCConnection, JSONRPCv2, NewlineFramer, Request, RPCError, RPCSession, TaskTimeout

log = logging.getLogger("sp_scan.server.electrum")

INVALID_REQUEST = -32600


class _Reply:
    """The reply to one received line (a request or a batch) and the callbacks to run once it is written."""

    __slots__ = ("callbacks",)

    def __init__(self) -> None:
        self.callbacks: list = []


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
    """JSON-RPC whose requests of one received line share a `_Reply`."""

    def receive_message(self, message):
        items = super().receive_message(message)
        reply = _Reply()
        for item in items:
            if isinstance(item, Request):
                item.send_result = _SendResult(item.send_result, reply)
        return items


class _Json(JSONRPCv2):
    """JSON-RPC 2.0 whose error objects carry `data` when the error has it (Frigate's -32003, -32000)."""

    @classmethod
    def error_payload(cls, error, request_id):
        payload = super().error_payload(error, request_id)
        if getattr(error, "data", None) is not None:
            payload["error"]["data"] = error.data
        return payload


class _LineFramer(NewlineFramer):
    """Newline framing that runs a reply's `after_reply` callbacks once it frames that reply."""

    def __init__(self, max_size: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(max_size)
        self.loop = loop

    def frame(self, message):
        reply = _WRITING.get()
        if reply is not None:
            _WRITING.set(None)
            for callback in reply.callbacks:
                self.loop.call_soon(callback)  # after this write
            reply.callbacks.clear()
        return super().frame(message)


class _LineTooLong(Exception):
    """Ends the reading of a connection that sent a line over `max_line` bytes."""


class LineSession(RPCSession):
    """A server connection speaking newline-delimited JSON-RPC 2.0 (see the module docstring).

    Subclasses implement `serve_request(request)` (a request's result, or raise RPCError), and set
    `max_line` (bytes of one line) and `max_send_delay` (seconds a message may wait for a client
    that does not read) before the connection starts.
    """

    max_line = 1_000_000

    def __init__(self, transport) -> None:
        super().__init__(transport, connection=_Connection(_Json))
        self._dropping = False

    def default_framer(self):
        return _LineFramer(self.max_line, self.loop)

    async def serve_request(self, request):
        raise NotImplementedError

    async def handle_request(self, request):
        send_result = getattr(request, "send_result", None)
        _HANDLING.set(send_result.reply if isinstance(send_result, _SendResult) else None)
        return await self.serve_request(request)

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
            try:
                return await recv_message()
            except MemoryError:  # NewlineFramer: a line over max_line (the rest of it is not read)
                await self._refuse_line()
                self.loop.create_task(self.close(force_after=1))  # a task: close() waits for this loop to end
                raise _LineTooLong from None

        try:
            await super().process_messages(receive)
        except _LineTooLong:
            pass
        except TaskTimeout:  # a message waited max_send_delay: aiorpcx aborted the connection
            self.drop("it does not read what it is sent")

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
