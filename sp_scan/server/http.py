"""A small, strict HTTP/1.1 server on asyncio for `sp-scan serve`'s listeners.

Why not a framework: every limit of `limits.Limits` is applied where it has to be (at accept,
on the request head's bytes and time, on the write buffer), every refusal is JSON, and an
answer that is already built costs one parse and one `transport.write`.

What it speaks: HTTP/1.0 and 1.1, keep-alive, pipelined requests answered in order (one at a
time), `Content-Length` bodies up to `max_body_bytes` (with `Expect: 100-continue`), HEAD.
What it refuses, each with a JSON `{"error"}` body and the connection closed: a head over
`max_header_bytes` (431) or with more than `max_headers` fields, a request target that is not
visible ASCII or a path that is not UTF-8 once decoded (400), header lines that do not parse,
folded lines, a bad or repeated `Content-Length`, `Content-Length` with `Transfer-Encoding`
(400: request smuggling), `Transfer-Encoding` alone (501), a version other than HTTP/1.x
(505). Parser refusals are logged as one line, rate-limited.

Timeouts (swept once a second): a request head must arrive within `header_timeout` of its
first byte, a connection with nothing in progress is closed after `idle_timeout`, and one
whose answer has not moved out of its write buffer for `write_timeout` is aborted (its
buffered bytes freed). While an answer waits in the buffer above the transport's high-water
mark, the connection's further requests are not read.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .limits import Gate, RateLimitedLog, Ticket

REASONS = {
    100: "Continue", 200: "OK", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 408: "Request Timeout", 413: "Content Too Large", 429: "Too Many Requests",
    431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
    503: "Service Unavailable", 505: "HTTP Version Not Supported",
}  # fmt: skip
JSON_HEADERS = b"Content-Type: application/json; charset=utf-8\r\nAccess-Control-Allow-Origin: *\r\n"
"""Every answer is public chain data: browser wallets on any origin may read it (as from BlindBit)."""
SWEEP_EVERY = 1.0
WRITE_HIGH_WATER = 256 * 1024
_TARGET = re.compile(rb"[\x21-\x7e]+")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)|(?<!\r)\n")
_VERSION = re.compile(rb"HTTP/\d\.\d")
_END = b"\r\n\r\n"
HEAD_CACHE = 1024
"""Parsed request heads kept by their bytes: a client repeats the same head on its keep-alive connection."""


class BadRequest(Exception):
    """A request the parser refuses: the status and the message of the JSON error; the connection is closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Request:
    """A parsed request. Header names are lower case (the dict is shared by requests with the same head:
    read it only); `path` is percent-decoded; `query` is raw."""

    method: str
    path: str
    query: str
    version: str
    headers: dict[str, str]
    peer: str
    body: bytes = b""

    def query_value(self, name: str) -> str | None:
        """The first value of query parameter `name`, None when absent.

        Raises:
            BadRequest: the query string does not decode (400).
        """
        if not self.query:
            return None
        if "%" not in self.query and "+" not in self.query and ";" not in self.query:  # the usual `dustLimit=N`
            for pair in self.query.split("&"):
                key, _, value = pair.partition("=")
                if key == name:
                    return value
            return None
        try:
            for key, value in urllib.parse.parse_qsl(self.query, keep_blank_values=True, errors="strict", max_num_fields=32):
                if key == name:
                    return value
        except ValueError as exc:  # UnicodeDecodeError is one
            raise BadRequest(400, f"the query string does not decode: {str(exc)[:80]}") from None
        return None


@dataclass(slots=True)
class Response:
    """An answer: status, body, and header lines (each ending in CRLF) other than Content-Length and Connection."""

    status: int
    body: bytes
    headers: bytes = JSON_HEADERS
    close: bool = False
    length: int | None = None
    """Content-Length to announce when it is not len(body) (a HEAD answer)."""
    wire: bytes | None = None
    """The whole response as sent on a keep-alive connection, when it was built ahead."""


def json_error(status: int, message: str, headers: bytes = b"", close: bool = False) -> Response:
    """A `{"error": message}` answer."""
    return Response(status, json.dumps({"error": message}, separators=(",", ":")).encode(), JSON_HEADERS + headers, close)


def head_bytes(response: Response, keep_alive: bool) -> bytes:
    """The status line and headers of `response` (ending with the empty line)."""
    length = len(response.body) if response.length is None else response.length
    connection = b"" if keep_alive else b"Connection: close\r\n"
    return b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
        response.status, REASONS.get(response.status, "Unknown").encode(), length, connection, response.headers,
    )  # fmt: skip


Handler = Callable[[Request], "Response | Awaitable[Response]"]
AccessLog = Callable[[Request, Response, float], None]


def parse_head(head: bytes, peer: str, max_headers: int) -> tuple[Request, int | None, bool]:
    """Parse a request head (without its final empty line): (request, body length or None, wants 100-continue).

    Raises:
        BadRequest: anything the module docstring lists.
    """
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise BadRequest(400, "the request line is not METHOD TARGET VERSION")
    method, target, version = parts
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        if _VERSION.fullmatch(version):
            raise BadRequest(505, "only HTTP/1.0 and HTTP/1.1 are served")
        raise BadRequest(400, "the request line has no HTTP version")
    if not _TOKEN.fullmatch(method):
        raise BadRequest(400, "the method is not a token")
    if not _TARGET.fullmatch(target):
        raise BadRequest(400, "the request target is not visible ASCII")
    if not target.startswith(b"/"):
        if not target.startswith((b"http://", b"https://")):
            raise BadRequest(400, "the request target is not a path")
        target = b"/" + target.split(b"/", 3)[3] if target.count(b"/") >= 3 else b"/"
    raw_path, _, query = target.decode("ascii").partition("?")
    try:
        path = urllib.parse.unquote(raw_path, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest(400, "the path is not UTF-8 once percent-decoded") from None
    if len(lines) - 1 > max_headers:
        raise BadRequest(431, f"more than {max_headers} header fields")
    if _CONTROL.search(head):  # one look over the whole head: no CR or LF but in CRLF, no other controls but tab
        raise BadRequest(400, "the request head holds control characters or a bare CR or LF")
    headers: dict[str, str] = {}
    lengths: list[bytes] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise BadRequest(400, "a header line does not parse (folded, or a bad name)")
        value = value.strip(b" \t")
        key = name.decode("ascii").lower()
        text = value.decode("latin-1")
        if key == "content-length":
            lengths.append(value)
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    if "transfer-encoding" in headers:
        if lengths:
            raise BadRequest(400, "Content-Length and Transfer-Encoding together")
        raise BadRequest(501, "Transfer-Encoding is not supported: send a Content-Length")
    length = None
    if lengths:
        if len(set(lengths)) != 1 or not lengths[0].isdigit() or len(lengths[0]) > 12:
            raise BadRequest(400, "a bad or repeated Content-Length")
        length = int(lengths[0])
    request = Request(method.decode("ascii"), path, query, version.decode("ascii"), headers, peer)
    return request, length, headers.get("expect", "").lower() == "100-continue"


def keeps_alive(request: Request) -> bool:
    connection = request.headers.get("connection", "").lower()
    if request.version == "HTTP/1.1":
        return "close" not in connection
    return "keep-alive" in connection


class HttpServer:
    """Listen and serve `handler` under `gate`'s limits; `connections` are the open ones.

    Args:
        handler: called with each request; returns a Response or an awaitable of one.
        gate: the process's shared limits (this listener counts as `listener`).
        listener: the name this listener is counted under.
        log: one line per noteworthy event (parser refusals and limits, rate-limited).
        access_log: called once per answered request, or None.
    """

    def __init__(
        self,
        handler: Handler,
        gate: Gate,
        listener: str = "http",
        log: Callable[[str], None] = print,
        access_log: AccessLog | None = None,
    ) -> None:
        self.handler, self.gate, self.listener = handler, gate, listener
        self.limits = gate.limits
        self.log = log
        self.access_log = access_log
        self.connections: set[HttpConnection] = set()
        self.heads: dict[bytes, tuple[Request, int | None, bool]] = {}
        self.requests = 0
        self.bad_requests = 0
        self.timeouts = {"header": 0, "idle": 0, "write": 0}
        self._limited_log = RateLimitedLog()
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.TimerHandle | None = None

    async def start(self, host: str, port: int, backlog: int = 1024) -> tuple[str, int]:
        """Bind and listen; return the (host, port) bound.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: HttpConnection(self), host, port, backlog=backlog, reuse_address=True)
        self._sweeper = loop.call_later(SWEEP_EVERY, self._sweep)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        """Stop listening, let answers in progress finish (up to 10 s), then close every connection."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        tasks = [c.task for c in self.connections if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        for connection in list(self.connections):
            connection.transport.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def note(self, kind: str, line: str) -> None:
        """Log `line`, at most once per 10 s for each kind."""
        passed = self._limited_log(kind, line)
        if passed is not None:
            self.log(f"sp-scan serve: {passed}")

    def _sweep(self) -> None:
        now = time.monotonic()
        limits = self.limits
        for connection in list(self.connections):
            connection.sweep(now, limits)
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_EVERY, self._sweep)


@dataclass(eq=False)
class HttpConnection(asyncio.Protocol):
    """One client connection (see `HttpServer`)."""

    server: HttpServer
    transport: asyncio.Transport = field(init=False)
    peer: str = ""
    ticket: Ticket | None = None
    task: asyncio.Task | None = None
    _buffer: bytearray = field(default_factory=bytearray)
    _since: float = 0.0
    _receiving: bool = False
    _paused: bool = False
    _closing: bool = False
    _lingering: bool = False
    _eof: bool = False
    _pending: int = 0
    _progress: float = 0.0

    # ---- asyncio.Protocol ----

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else str(peer)
        server = self.server
        self.ticket = server.gate.admit(server.listener, self.peer)
        if self.ticket is None:
            why = server.gate.refusal(self.peer) or "total"
            if why == "per-ip":
                refusal = json_error(429, "too many connections from your address", b"Retry-After: 10\r\n", close=True)
            else:
                refusal = json_error(503, "the server is at its connection limit; retry later", b"Retry-After: 10\r\n", close=True)
            server.note(f"refused-{why}", f"refused a connection from {self.peer}: {refusal.body.decode()}")
            transport.write(head_bytes(refusal, False) + refusal.body)
            transport.close()
            self._closing = True
            return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        server.connections.add(self)
        self._since = self._progress = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.server.connections.discard(self)
        if self.ticket is not None:
            self.server.gate.release(self.ticket)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        if self._closing:  # a refused request's remaining bytes are read and dropped (see _refuse)
            return
        if not self._receiving and not self._buffer:
            self._receiving, self._since = True, time.monotonic()
        self._buffer += data
        if self.task is None and not self._paused:
            self._process()
        elif len(self._buffer) > self.server.limits.max_header_bytes + self.server.limits.max_body_bytes:
            self.transport.pause_reading()  # pipelined requests beyond one are read once this one is answered

    def eof_received(self) -> bool:
        self._eof = True
        return self.task is not None and not self._lingering  # keep the write side open for an answer in progress

    def pause_writing(self) -> None:
        self._paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        self._progress = time.monotonic()
        if self._closing:
            return
        self.transport.resume_reading()
        if self.task is None:
            self._process()

    # ---- requests ----

    def _process(self) -> None:
        """Answer every complete request in the buffer, in order, until one needs to wait."""
        server, limits = self.server, self.server.limits
        while not self._closing and not self._paused and self.task is None:
            end = self._buffer.find(_END, 0, limits.max_header_bytes + 4)
            if end < 0:
                if len(self._buffer) > limits.max_header_bytes:
                    self._refuse(BadRequest(431, f"the request head is over {limits.max_header_bytes} bytes"))
                return
            head = bytes(self._buffer[:end])
            parsed = server.heads.get(head)
            if parsed is None:
                try:
                    parsed = parse_head(head, "", limits.max_headers)
                except BadRequest as exc:
                    self._refuse(exc)
                    return
                if len(server.heads) >= HEAD_CACHE:
                    del server.heads[next(iter(server.heads))]
                server.heads[head] = parsed
            template, length, expect = parsed
            request = Request(template.method, template.path, template.query, template.version, template.headers, self.peer)
            body_start = end + 4
            if length:
                if length > limits.max_body_bytes:
                    self._refuse(BadRequest(400, f"the request body is over {limits.max_body_bytes} bytes"))
                    return
                if len(self._buffer) < body_start + length:
                    if expect and len(self._buffer) == body_start:
                        self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    return  # the body is still coming (header_timeout covers it)
                request.body = bytes(self._buffer[body_start : body_start + length])
                body_start += length
            del self._buffer[:body_start]
            self._receiving = bool(self._buffer)
            self._since = time.monotonic()
            server.requests += 1
            if not server.gate.allow_request(self.ticket):
                server.note("rate", f"rate limited {self.peer} ({limits.per_ip_rate:g} requests/s per address)")
                self._answer(request, json_error(429, "too many requests from your address; slow down", b"Retry-After: 1\r\n"), time.monotonic())
                continue
            began = time.monotonic()
            try:
                answer = server.handler(request)
            except BadRequest as exc:
                answer = json_error(exc.status, str(exc))
            if isinstance(answer, Response):
                self._answer(request, answer, began)
            else:
                self.task = asyncio.ensure_future(self._await(request, answer, began))

    async def _await(self, request: Request, answer: Awaitable[Response], began: float) -> None:
        try:
            response = await answer
        except BadRequest as exc:
            response = json_error(exc.status, str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler bug: one line, a JSON 500, the server goes on
            self.server.note("internal", f"{request.method} {request.path} failed: {type(exc).__name__}: {exc}")
            response = json_error(500, "internal error")
        self.task = None
        if self._closing:
            return
        self._answer(request, response, began)
        self._since = time.monotonic()
        if not self._paused:
            self.transport.resume_reading()  # if a pipelined backlog paused it (data_received)
        self._process()

    def _answer(self, request: Request, response: Response, began: float) -> None:
        keep_alive = keeps_alive(request) and not response.close
        if request.method == "HEAD":
            response = Response(response.status, b"", response.headers, response.close, len(response.body))
        if keep_alive and response.wire is not None:
            self.transport.write(response.wire)
        else:
            self.transport.write(head_bytes(response, keep_alive) + response.body)
        self._progress = time.monotonic()
        if self.server.access_log is not None:
            self.server.access_log(request, response, self._progress - began)
        if not keep_alive or (self._eof and not self._buffer):  # the client sent its last request
            self._close()

    def _refuse(self, exc: BadRequest) -> None:
        """Answer a request the parser refused, log it (rate-limited) and close.

        The connection lingers: its write side is shut once the answer is out and what the client
        still sends is read and dropped until it closes (at most header_timeout), so that the
        client reads the answer instead of a reset.
        """
        self.server.bad_requests += 1
        self.server.note("parse", f"refused a request from {self.peer}: {exc.status} {exc}")
        response = json_error(exc.status, str(exc), close=True)
        self.transport.write(head_bytes(response, False) + response.body)
        self._closing = self._lingering = True
        self._buffer.clear()
        self._since = time.monotonic()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def _close(self) -> None:
        self._closing = True
        self._buffer.clear()
        self.transport.close()  # after the buffered answer is written (or write_timeout aborts it)

    def sweep(self, now: float, limits) -> None:
        """Close or abort the connection when one of its timeouts has passed."""
        transport = self.transport
        if transport.is_closing() and not transport.get_write_buffer_size():
            return
        pending = transport.get_write_buffer_size()
        if pending:
            if pending < self._pending:
                self._progress = now
            self._pending = pending
            if now - self._progress > limits.write_timeout:
                self.server.timeouts["write"] += 1
                self.server.note("write-timeout", f"dropped {self.peer}: its answer was not read for {limits.write_timeout:g} s")
                self._closing = True
                transport.abort()  # frees the buffered answer
            return
        self._pending = 0
        if self._lingering and now - self._since > limits.header_timeout:
            transport.close()
            return
        if self.task is not None or self._closing:
            return
        if self._receiving and now - self._since > limits.header_timeout:
            self.server.timeouts["header"] += 1
            self._refuse(BadRequest(408, f"no complete request within {limits.header_timeout:g} s"))
        elif not self._receiving and now - self._since > limits.idle_timeout:
            self.server.timeouts["idle"] += 1
            self._close()
