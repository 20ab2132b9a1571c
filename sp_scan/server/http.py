"""An HTTP/1.x server on asyncio for `sp-scan serve`'s listeners; llhttp (httptools) parses the requests.

Why our own protocol rather than a framework: every limit of `limits.Limits` is applied where it
has to be (at accept, on the request head's bytes and time, on the write buffer), every refusal is
JSON, and an answer that is already built costs one `transport.write`. The parsing is llhttp's, the
C parser of Node and uvicorn, through httptools, fed at most FEED bytes at a time.

What llhttp decides: the request line and header syntax (methods it knows, else 501; a target of
visible ASCII; header names that are tokens; no control characters, bare CR or LF, or folded
lines: 400), the version (HTTP/0.9 to 2.0, others 505; it reads `RTSP/1.0` as 1.0 too),
Content-Length (digits, one field, never with Transfer-Encoding: 400, the smuggling cases),
keep-alive, and where each pipelined request ends. What we check on top: a head over
`max_header_bytes` (431; counted as its bytes arrive) or with more than `max_headers` fields (431);
a target that is not a path or an http(s) URL, or a path that is not UTF-8 once percent-decoded
(400); only HTTP/1.0 and 1.1 are served (0.9: 400, 2.0: 505); Transfer-Encoding (501: send a
Content-Length); a body over `max_body_bytes` (400); `Expect: 100-continue` (answered once the
answers before it are out). An Upgrade (h2c, websocket) is not made: the request is answered in
HTTP/1.1 and the connection closed after it, so nothing the client sends next is read as HTTP (one
with a body: 400). Each refusal has a JSON `{"error"}` body, closes the connection and is logged as
one line, rate-limited. Pipelined requests are answered in order, one at a time; HEAD answers carry
the GET headers and no body. A read equal to one that llhttp parsed, from a request's start, as one
whole keep-alive request without a body (a client repeating its request) is answered from that
parse when the connection's parser is between requests (`HttpServer.known`): llhttp would read the
same bytes the same way.

Timeouts (swept once a second): a request head must arrive within `header_timeout` of its
first byte, a connection with nothing in progress is closed after `idle_timeout`, and one
whose answer has not moved out of its write buffer for `write_timeout` is aborted (its
buffered bytes freed). While an answer waits in the buffer above the transport's high-water
mark, the connection's further requests are not read.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httptools

from .limits import Gate, Limits, RateLimitedLog, Ticket

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
FEED = 4096
"""Bytes handed to the parser at once: bounds the requests one feed can queue and what a head in progress holds."""
HEAD_CACHE = 1024
"""Heads kept parsed, by method, target and fields (`HttpServer.heads`) and by their bytes (`HttpServer.known`)."""
REQUEST_LINE = "the request line is not METHOD TARGET VERSION"
VERSIONS = "only HTTP/1.0 and HTTP/1.1 are served"
CONTROLS = "the request head holds control characters or a bare CR or LF"
HEADER_LINE = "a header line does not parse (folded, or a bad name)"
LLHTTP_REFUSALS = (
    ("can't be present with", 400, "Content-Length and Transfer-Encoding together"),
    ("Content-Length", 400, "a bad or repeated Content-Length"),
    ("Transfer-Encoding", 501, "Transfer-Encoding is not supported: send a Content-Length"),
    ("PRI/Upgrade", 505, VERSIONS),
    ("Invalid HTTP version", 505, VERSIONS),
    ("major version", 505, VERSIONS),
    ("minor version", 505, VERSIONS),
    ("method", 501, "the method is not implemented"),
    ("url", 400, "the request target is not visible ASCII or not a URL"),
    ("header value char", 400, CONTROLS),
    ("Missing expected", 400, CONTROLS),
    ("Expected LF", 400, CONTROLS),
    ("header", 400, HEADER_LINE),
    ("space after start line", 400, HEADER_LINE),
)
"""(a phrase of llhttp's reason, our status, our message): the first match decides; none: REQUEST_LINE, 400."""


class BadRequest(Exception):
    """A request the parser refuses: the status and the message of the JSON error; the connection is closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Request:
    """A parsed request. Header names are lower case (the dict is shared by requests with the same head:
    read it only); `path` is percent-decoded; `query` is raw; `keep_alive` is llhttp's reading of
    Connection and the version (False for an Upgrade)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    peer: str
    keep_alive: bool = True
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


@dataclass(frozen=True, slots=True)
class Head:
    """What a request head that llhttp accepted says, once our checks passed (`HttpServer.heads` and `.known` keep it).

    Attributes:
        length: the body's Content-Length (0 without one).
        expect: the client waits for `100 Continue` before it sends the body.
        upgrade: the head has an Upgrade field (llhttp switches protocols when Connection names it too).
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    length: int
    expect: bool
    upgrade: bool


def parse_head(method: bytes, target: bytes, fields: list[bytes], limits: Limits) -> Head:
    """Our checks on a head that llhttp accepted (the module docstring lists them) and what it says.

    Args:
        method: the method, as llhttp names it.
        target: the request target, visible ASCII (llhttp checked).
        fields: header names and values, alternating, as llhttp delimits them.
        limits: max_header_bytes and max_body_bytes are applied.

    Raises:
        BadRequest: a head over max_header_bytes (431), a target that is not a path or an http(s)
            URL or whose path is not UTF-8 (400), Transfer-Encoding (501), a body over max_body_bytes (400).
    """
    if len(method) + len(target) + 10 + sum(map(len, fields)) + 2 * len(fields) > limits.max_header_bytes:
        raise BadRequest(431, f"the request head is over {limits.max_header_bytes} bytes")
    if not target.startswith(b"/") and not target.startswith((b"http://", b"https://")):
        raise BadRequest(400, "the request target is not a path")
    try:
        url = httptools.parse_url(target)
    except httptools.HttpParserInvalidURLError:
        raise BadRequest(400, "the request target is not visible ASCII or not a URL") from None
    try:
        path = urllib.parse.unquote((url.path or b"/").decode("ascii"), errors="strict")
    except UnicodeDecodeError:
        raise BadRequest(400, "the path is not UTF-8 once percent-decoded") from None
    headers: dict[str, str] = {}
    for name, value in zip(fields[::2], fields[1::2]):
        key = name.decode("ascii").lower()  # a token (llhttp checked)
        text = value.decode("latin-1").rstrip(" \t")  # llhttp strips the whitespace before a value, not after
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    if "transfer-encoding" in headers:  # llhttp refused it next to a Content-Length
        raise BadRequest(501, "Transfer-Encoding is not supported: send a Content-Length")
    length = int(headers.get("content-length", 0))  # digits, one field (llhttp checked)
    if length > limits.max_body_bytes:
        raise BadRequest(400, f"the request body is over {limits.max_body_bytes} bytes")
    return Head(
        method.decode("ascii"), path, (url.query or b"").decode("ascii"), headers, length,
        headers.get("expect", "").lower() == "100-continue", "upgrade" in headers,
    )  # fmt: skip


def llhttp_refusal(exc: httptools.HttpParserError) -> BadRequest:
    """Our refusal for a request llhttp rejects: LLHTTP_REFUSALS' status and message, with llhttp's reason."""
    reason = str(exc)
    for phrase, status, message in LLHTTP_REFUSALS:
        if phrase in reason:
            return BadRequest(status, f"{message} ({reason})")
    return BadRequest(400, f"{REQUEST_LINE} ({reason})")


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
        self.heads: dict[tuple[bytes, ...], Head] = {}
        self.known: dict[bytes, Head] = {}
        """Reads that llhttp parsed, from a request's start, as one whole keep-alive request without a body."""
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
    """One client connection (see `HttpServer`); llhttp's callbacks (`on_*`) queue its requests."""

    server: HttpServer
    transport: asyncio.Transport = field(init=False)
    peer: str = ""
    ticket: Ticket | None = None
    task: asyncio.Task | None = None
    _parser: httptools.HttpRequestParser | None = None
    _queue: deque[Request | BadRequest] = field(default_factory=deque)
    """Requests parsed and not yet answered, in order, and the refusal that ends them."""
    _unparsed: bytearray = field(default_factory=bytearray)
    """Bytes received while an answer is in progress, fed FEED at a time once it is out."""
    _stopped: bool = False
    """The parser reads no more: a refusal or an Upgrade is queued."""
    _url: bytes = b""
    _fields: list[bytes] = field(default_factory=list)
    _request: Request | None = None
    _head: Head | None = None
    _at_start: bool = True
    """llhttp is between requests: what it has read ended one (see HttpServer.known)."""
    _body: bytearray | None = None
    _in_head: bool = False
    _partial: bool = False
    """Bytes of a request not yet complete were fed: a head in progress is timed by header_timeout."""
    _head_fed: int = 0
    _max_fields: int = 0
    _expecting: bool = False
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
        self._parser = httptools.HttpRequestParser(self)
        self._max_fields = 2 * server.limits.max_headers
        server.connections.add(self)
        self._since = self._progress = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._parser = None  # it holds this protocol's callbacks
        self.server.connections.discard(self)
        if self.ticket is not None:
            self.server.gate.release(self.ticket)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        if self._closing or self._stopped:  # a refused request's remaining bytes are read and dropped (see _refuse)
            return
        if not self._receiving:
            self._receiving, self._since = True, time.monotonic()
        if self.task is not None or self._paused or self._unparsed:
            self._unparsed += data
            if len(self._unparsed) > self.server.limits.max_header_bytes + self.server.limits.max_body_bytes:
                self.transport.pause_reading()  # pipelined requests beyond these are read once this one is answered
            return
        if len(data) > FEED:
            self._unparsed += data
        elif self._at_start and (head := self.server.known.get(data)) is not None:
            # llhttp read these bytes from a request's start as one whole request: it would again
            self._queue.append(Request(head.method, head.path, head.query, head.headers, self.peer))
        else:
            self._feed(data)
        self._process()

    def eof_received(self) -> bool:
        self._eof = True
        # keep the write side open for the answers still to come
        return not self._lingering and (self.task is not None or bool(self._queue) or bool(self._unparsed))

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

    # ---- llhttp's callbacks (from feed_data; a BadRequest raised here is the refusal) ----

    def on_url(self, url: bytes) -> None:
        self._url += url  # in pieces when the target spans feeds (_feed caps the head's bytes)
        self._in_head = self._partial = True

    def on_header(self, name: bytes, value: bytes) -> None:
        fields = self._fields
        fields.append(name)
        fields.append(value)
        if len(fields) > self._max_fields:
            raise BadRequest(431, f"more than {self.server.limits.max_headers} header fields")

    def on_headers_complete(self) -> None:
        server, parser = self.server, self._parser
        method = parser.get_method()
        key = (method, self._url, *self._fields)
        self._fields.clear()
        self._url, self._in_head, self._head_fed = b"", False, 0
        version = parser.get_http_version()
        if version != "1.1" and version != "1.0":
            raise BadRequest(400, REQUEST_LINE) if version == "0.9" else BadRequest(505, VERSIONS)  # 0.9: no version
        keep_alive = parser.should_keep_alive()
        head = server.heads.get(key)
        if head is None:
            head = parse_head(method, key[1], list(key[2:]), server.limits)
            if len(server.heads) >= HEAD_CACHE:
                del server.heads[next(iter(server.heads))]
            server.heads[key] = head
        if head.upgrade and parser.should_upgrade():
            if head.length:  # llhttp would not read the body
                raise BadRequest(400, "an Upgrade request with a body is not served")
            keep_alive = False  # answered in HTTP/1.1, then closed: what follows is not HTTP
        self._request = Request(head.method, head.path, head.query, head.headers, self.peer, keep_alive)
        self._head = head
        if head.length:
            self._body = bytearray()
            self._expecting = head.expect

    def on_body(self, body: bytes) -> None:
        self._body += body  # type: ignore[operator]  # at most max_body_bytes: llhttp ends the body at its length

    def on_message_complete(self) -> None:
        request = self._request
        if self._body is not None:
            request.body = bytes(self._body)
            self._body = None
        self._partial = self._expecting = False
        self._queue.append(request)

    # ---- requests ----

    def _feed(self, data: bytes | bytearray) -> None:
        """Parse `data`: its requests, and a refusal that ends them, join the queue."""
        at_start, queued = self._at_start, len(self._queue)
        self._partial, self._at_start = True, False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._stopped = True  # the request that asked is queued; nothing after it is read
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, BadRequest):
                raise (exc.__context__ or exc) from None
            self._stopped = True
            self._queue.append(exc.__context__)
        except httptools.HttpParserError as exc:
            self._stopped = True
            self._queue.append(llhttp_refusal(exc))
        else:
            if self._in_head:  # llhttp holds the field in progress: the head must end within the cap (and a feed)
                self._head_fed += len(data)
                if self._head_fed > self.server.limits.max_header_bytes + FEED:
                    self._stopped = True
                    self._queue.append(BadRequest(431, f"the request head is over {self.server.limits.max_header_bytes} bytes"))
            elif not self._partial and data[-4:] == b"\r\n\r\n":
                # llhttp is between requests: since the last one ended it read no target (on_url sets _partial),
                # so only empty lines or the first letters of a method, and those never end in CRLF CRLF
                self._at_start = True
                head = self._head
                if at_start and len(self._queue) == queued + 1 and self._queue[-1].keep_alive and not head.length:
                    known = self.server.known
                    if len(known) >= HEAD_CACHE:
                        del known[next(iter(known))]
                    known[bytes(data)] = head

    def _process(self) -> None:
        """Answer the queued requests in order and feed the parser what waits, until an answer needs to wait."""
        while not self._closing and not self._paused and self.task is None:
            if self._queue:
                item = self._queue.popleft()
                if isinstance(item, BadRequest):
                    self._refuse(item)
                    return
                self._serve(item)
                continue
            if self._expecting:
                self._expecting = False
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            if self._stopped or not self._unparsed:
                break
            chunk = self._unparsed[:FEED]
            del self._unparsed[:FEED]
            self._feed(chunk)
        self._receiving = self._partial or bool(self._unparsed)

    def _serve(self, request: Request) -> None:
        server = self.server
        self._since = time.monotonic()
        server.requests += 1
        if not server.gate.allow_request(self.ticket):
            server.note("rate", f"rate limited {self.peer} ({server.limits.per_ip_rate:g} requests/s per address)")
            self._answer(request, json_error(429, "too many requests from your address; slow down", b"Retry-After: 1\r\n"), self._since)
            return
        try:
            answer = server.handler(request)
        except BadRequest as exc:
            answer = json_error(exc.status, str(exc))
        if isinstance(answer, Response):
            self._answer(request, answer, self._since)
        else:
            self.task = asyncio.ensure_future(self._await(request, answer, self._since))

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
        keep_alive = request.keep_alive and not response.close
        if request.method == "HEAD":
            response = Response(response.status, b"", response.headers, response.close, len(response.body))
        if keep_alive and response.wire is not None:
            self.transport.write(response.wire)
        else:
            self.transport.write(head_bytes(response, keep_alive) + response.body)
        self._progress = time.monotonic()
        if self.server.access_log is not None:
            self.server.access_log(request, response, self._progress - began)
        if not keep_alive or (self._eof and not self._queue and not self._unparsed):  # the client sent its last request
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
        self._queue.clear()
        self._unparsed.clear()
        self._since = time.monotonic()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def _close(self) -> None:
        self._closing = True
        self._queue.clear()
        self._unparsed.clear()
        self.transport.close()  # after the buffered answer is written (or write_timeout aborts it)

    def sweep(self, now: float, limits: Limits) -> None:
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
