"""The Electrum JSON-RPC listener: newline-delimited JSON-RPC 2.0 over TCP or TLS, on aiorpcx (`rpc.LineSession`).

Frigate's rules for every connection: `server.version` first (anything before it is refused with
-1), the negotiated version the lower of the client's and the backend's within 1.4-1.6; silent-
payments and Cake methods answered from the index; everything else proxied to the client's own
backend connection. Limits: connections and JSON-RPC calls count in the process's `limits.Gate`,
shared with the HTTP and gRPC listeners (per address group and in total; a call over the group's
rate gets -101, and aiorpcx disconnects a client whose errors keep costing); subscriptions count
in `caps.SubscriptionCaps` (-32005 over a cap); a line over `max_line` bytes gets -32600 "request
too large" and the connection is closed, as is one begun and not finished within the Gate's
`header_timeout`; the next line is read only while the connection has fewer than `max_in_flight`
requests unanswered and fewer than `max_unsent` bytes waiting for the socket; a client that stops
reading is disconnected once a message waits the Gate's `write_timeout` for it or `outbox`
notifications pile up; one that sends nothing for `idle_timeout` is closed.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiorpcx import RPCError

from sp_scan.errors import HeightError
from sp_scan.index import Index
from sp_scan.proto import electrum_sp

from ..answers import Readers
from ..limits import Gate
from . import cake, frigate
from .caps import SubscriptionCaps
from .passes import ScanService, Watch
from .proxy import METHOD_NOT_FOUND, Backend, BackendUrl, DataError, unavailable
from .rpc import LineSession, PlainError

log = logging.getLogger("sp_scan.server.electrum")

SERVER_NAME = "sp-scan"
MIN_VERSION, MAX_VERSION = (1, 4), (1, 6)
"""Frigate's range: at least 1.4; at most 1.6 (with a backend that does package broadcast)."""
NOT_NEGOTIATED = -1
UNSUPPORTED_VERSION = -32003
RATE_LIMITED = -101
"""aiorpcx's (and ElectrumX's) "excessive resource usage": a call over the address group's request rate."""
OUTBOX_LIMIT = 10_000
"""Notifications waiting for a client that does not read before it is disconnected."""
MAX_LINE = 1_000_000
MAX_IN_FLIGHT = 20
"""aiorpcx handles 20 requests of a connection at once: more in flight would only wait."""
MAX_UNSENT = 1 << 20
GENESIS = {
    "main": "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
    "test": "000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943",
    "testnet4": "00000000da84f2bafbbc53dee25a72ae507ff4914b867c565be350b0da8bf043",
    "signet": "00000008819873e925422c1ff0f99f7cc9bbb232af63a077a480a3633bee1ef6",
    "regtest": "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206",
}
SCRIPTHASH_SUBSCRIBE, SCRIPTHASH_UNSUBSCRIBE = "blockchain.scripthash.subscribe", "blockchain.scripthash.unsubscribe"
PROGRESS_TICK = 1.0
LISTEN_BACKLOG = 1024
LISTENER = "electrum"
"""The name this listener's connections count under in the Gate."""


@dataclass(frozen=True)
class ElectrumLimits:
    """The Electrum listener's own caps (Frigate's defaults), on top of the connection and request
    limits of the process's `limits.Gate`.

    Attributes:
        max_labels: labels of one silent-payments subscription (the change label not counted).
        max_subscriptions: silent-payments subscriptions of one connection.
        max_subscriptions_per_ip: subscriptions (silent-payments and scripthash) of one address group.
        max_subscriptions_total: subscriptions of every client together.
        max_line: bytes of one JSON-RPC line (a request or a batch).
        max_in_flight: requests of one connection received and not yet answered (a batch counts each
            of its requests) before the connection's next line is read.
        max_unsent: bytes of answers and notifications of one connection waiting for its socket
            before its next line is read.
        outbox: notifications waiting for a client before it is disconnected.
        idle_timeout: seconds a connection may send nothing before it is closed (ElectrumX's
            session_timeout: Electrum clients ping every few minutes).
    """

    max_labels: int = frigate.MAX_LABELS
    max_subscriptions: int = frigate.MAX_SUBSCRIPTIONS
    max_subscriptions_per_ip: int = 1_000
    max_subscriptions_total: int = 100_000
    max_line: int = MAX_LINE
    max_in_flight: int = MAX_IN_FLIGHT
    max_unsent: int = MAX_UNSENT
    outbox: int = OUTBOX_LIMIT
    idle_timeout: float = 600.0


def _version(text) -> tuple[int, ...]:
    if not isinstance(text, str) or len(text) > 20:
        raise ValueError
    parts = tuple(int(p) for p in text.split("."))
    if not parts or any(p < 0 for p in parts):
        raise ValueError
    return parts


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def _client_versions(value) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(min, max) of server.version's protocol_version: "1.4" or ["1.4", "1.6"]."""
    if value is None:
        return MIN_VERSION, MIN_VERSION
    if isinstance(value, list) and 1 <= len(value) <= 2:
        low, high = _version(value[0]), _version(value[-1])
        return low, high
    return _version(value), _version(value)


@dataclass(eq=False)
class ServerState:
    """What every connection shares: the index, its scanner, limits and the backend's address."""

    db: Path
    network: str
    scans: ScanService
    readers: Readers
    gate: Gate
    limits: ElectrumLimits
    backend: BackendUrl | None
    tls: bool = False
    caps: SubscriptionCaps = field(init=False)
    sessions: set = field(default_factory=set)
    requests: int = 0
    """JSON-RPC calls received (the operator's view)."""

    def __post_init__(self) -> None:
        self.caps = SubscriptionCaps(self.limits.max_subscriptions_per_ip, self.limits.max_subscriptions_total)


class ElectrumSession(LineSession):
    """One client connection."""

    processing_timeout = 600.0
    """A Cake stream of 1,000 blocks is one request."""

    def __init__(self, transport, *, state: ServerState) -> None:
        super().__init__(transport)
        self.state = state
        self.max_line, self.max_send_delay = state.limits.max_line, state.gate.limits.write_timeout
        self.line_timeout = state.gate.limits.header_timeout
        self.max_in_flight, self.max_unsent = state.limits.max_in_flight, state.limits.max_unsent
        self.version: tuple[int, ...] | None = None
        self.version_reply: list | None = None
        self.backend: Backend | None = None
        self.subs: dict[str, frigate.Subscription] = {}
        self._subscribing = asyncio.Lock()  # FIFO: subscribes take their slots in arrival order
        self.outbox: asyncio.Queue = asyncio.Queue(state.limits.outbox)
        self._tasks: list[asyncio.Task] = []
        self.loop = asyncio.get_running_loop()
        host = (self.remote_address() and str(self.remote_address().host)) or "127.0.0.1"
        self.ticket = state.gate.admit(LISTENER, host)
        self.subscription_reservations = 0
        state.sessions.add(self)

    # --- lifetime ---

    async def process_messages(self, recv_message):
        if self.ticket is None:  # closed unanswered, as Frigate does: an answer would amplify a flood
            log.info("electrum: refused a connection from %s (connection limit)", self.remote_address())
            await self.abort()
            self.state.sessions.discard(self)
            return
        if self.state.backend is not None:
            self.backend = Backend(self.state.backend, self._relay)
        self._tasks = [asyncio.create_task(self._write()), asyncio.create_task(self._tick())]
        try:
            await super().process_messages(recv_message)
        finally:
            await self._cleanup()

    async def _cleanup(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sub in self.subs.values():
            if sub.watch is not None:
                self.state.scans.drop(sub.watch)
        self.subs.clear()
        if self.ticket is not None:
            self.state.caps.give(self.ticket, self.subscription_reservations)
            self.subscription_reservations = 0
            self.state.gate.release(self.ticket)
            self.ticket = None
        if self.backend is not None:
            await self.backend.close()
        self.state.sessions.discard(self)

    async def _write(self) -> None:
        while not self.is_closing():
            method, params = await self.outbox.get()
            await self.send_notification(method, params)  # a client that does not read is dropped there

    def notify(self, method: str, params) -> None:
        """Queue a notification; a client that lets `limits.outbox` of them pile up is disconnected."""
        try:
            self.outbox.put_nowait((method, params))
        except asyncio.QueueFull:
            self.drop("it does not read its notifications")

    async def _relay(self, method: str, params) -> None:
        self.notify(method, params)

    # --- requests ---

    async def serve_request(self, request):
        method, args = request.method, request.args
        self.state.requests += 1
        if not self.state.gate.allow_request(self.ticket, frigate.SUBSCRIBE_COST if method == electrum_sp.FRIGATE_SUBSCRIBE else 1):
            raise RPCError(RATE_LIMITED, "too many requests from your address; slow down")
        if method == "server.version":
            return await self.server_version(args)
        if self.version is None:
            raise RPCError(NOT_NEGOTIATED, "server.version must be the first message")
        local = LOCAL.get(method)
        if local is not None:
            return await local(self, args)
        return await self.proxy(method, args)

    def _backend(self) -> Backend:
        if self.backend is None:
            raise RPCError(METHOD_NOT_FOUND, "Method not found (this server has no backend Electrum server)")
        return self.backend

    async def proxy(self, method: str, args):
        return await self._backend().request(method, args)

    async def server_version(self, args):
        if self.version is not None:
            return self.version_reply
        client_name, wanted = frigate.named(args, ("client_name", "protocol_version"), 0)
        try:
            low, high = _client_versions(wanted)
        except (ValueError, TypeError):
            raise frigate.invalid("protocol_version must be a version string or [min, max]") from None
        capped = min(high, MAX_VERSION)
        version = capped
        if self.backend is not None:
            if not self.backend.connected and not await self.backend.connect():
                self.backend.start_reconnecting()
                raise unavailable(self.backend.reason)
            args = [client_name if isinstance(client_name, str) else "", [_version_text(low), _version_text(max(low, capped))]]
            answer = await self.backend.version(args)
            try:
                version = min(_version(answer[-1]), capped)
            except (ValueError, TypeError, IndexError, KeyError):
                raise unavailable(f"unexpected server.version answer {str(answer)[:80]}") from None
        if version < MIN_VERSION:
            raise DataError(UNSUPPORTED_VERSION, "Unsupported version", _version_text(version))
        self.version = version
        self.version_reply = [f"{SERVER_NAME} {_package_version()}", _version_text(version)]
        return self.version_reply

    async def server_features(self, args):
        features = None
        if self.backend is not None:
            try:
                features = await self.backend.request("server.features", [])
            except RPCError as exc:
                if exc.code != METHOD_NOT_FOUND:
                    raise
        if not isinstance(features, dict):
            features = {
                "genesis_hash": GENESIS.get(self.state.network),
                "hash_function": "sha256",
                "server_version": self.version_reply[0],
                "protocol_min": _version_text(MIN_VERSION),
                "protocol_max": _version_text(self.version),
                "pruning": None,
            }
        # this listener, as the address and port this client reached it at, never the backend's
        scheme = "ssl" if self.state.tls else "tcp"
        host, port = self.transport.socket.get_extra_info("sockname")[:2]
        if "services" in features:  # ElectrumX lists its own services
            features = {**features, "services": [f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"]}
        return {**features, "hosts": {host: {f"{scheme}_port": port}}, "silent_payments": [0]}

    async def ping(self, args):
        return None

    async def headers_subscribe(self, args):
        return await self._backend().subscribe_headers()

    async def scripthash_subscribe(self, args):
        backend = self._backend()
        (scripthash,) = frigate.named(args, ("scripthash",), 1)
        if not isinstance(scripthash, str) or len(scripthash) != 64:
            raise frigate.invalid("scripthash must be 64 hex digits")
        new = scripthash not in backend.statuses
        if new:
            self._reserve()
            backend.statuses[scripthash] = None
        try:
            status = await backend.request(SCRIPTHASH_SUBSCRIBE, [scripthash])
        except RPCError:
            if new:
                backend.statuses.pop(scripthash, None)
                self._unreserve(1)
            raise
        backend.statuses[scripthash] = status
        return status

    async def scripthash_unsubscribe(self, args):
        backend = self._backend()
        (scripthash,) = frigate.named(args, ("scripthash",), 1)
        if backend.statuses.pop(scripthash, False) is not False:
            self._unreserve(1)
        return await backend.request(SCRIPTHASH_UNSUBSCRIBE, [scripthash])

    def _reserve(self) -> None:
        if not self.state.caps.take(self.ticket):
            raise RPCError(frigate.SUBSCRIPTION_LIMIT, "subscription limit exceeded")
        self.subscription_reservations += 1

    def _unreserve(self, count: int) -> None:
        count = min(count, self.subscription_reservations)
        self.state.caps.give(self.ticket, count)
        self.subscription_reservations -= count

    # --- silent payments (Frigate) ---

    async def sp_subscribe(self, args):
        scan_hex, spend_hex, start, labels = frigate.named(args, ("scan_private_key", "spend_public_key", "start", "labels"), 2)
        scan32, spend33 = frigate.parse_keys(scan_hex, spend_hex)
        labels = frigate.parse_labels(labels, self.state.limits.max_labels)
        address = frigate.address_of(scan32, spend33, self.state.network)
        async with self._subscribing:  # one at a time, so the 100th request is the one refused
            tip = await self.state.readers.run(_tip_height)
            first, last, when = frigate.parse_start(start, tip)
            if when is not None:
                first = await self.state.readers.run(_height_at_time, when)
            return self._subscribe(address, scan32, spend33, labels, first, last)

    def _subscribe(self, address: str, scan32: bytes, spend33: bytes, labels, first: int, last) -> dict:
        """The limit check and the insertion, in one step (no await)."""
        existing = self.subs.get(address)
        if existing is None and len(self.subs) >= self.state.limits.max_subscriptions:
            raise frigate.invalid(f"subscription limit reached ({self.state.limits.max_subscriptions}) for this connection")
        if existing is not None:
            first = min(first, existing.reply["start_height"])
            self._drop(existing)
        else:
            self._reserve()
        reply = {"address": address, "labels": list(labels), "start_height": first}
        sub = frigate.Subscription(address, reply)
        self.subs[address] = sub
        receiver = frigate.receiver_of(scan32, spend33, labels)
        watch = Watch(receiver, first, last, self._deliverer(sub), self._failer(sub))
        sub.watch = watch
        self.after_reply(lambda: self._open(sub))
        return reply

    def _open(self, sub: frigate.Subscription) -> None:
        """The answer is out: start the scan, send what it has queued."""
        if self.subs.get(sub.address) is not sub:
            return
        sub.opened = True
        self.state.scans.add(sub.watch)

    def _deliverer(self, sub: frigate.Subscription):
        def deliver(entries, progress) -> None:  # on the scan thread
            self.loop.call_soon_threadsafe(self._delivered, sub, entries, progress)

        return deliver

    def _failer(self, sub: frigate.Subscription):
        def fail(message: str) -> None:
            log.error("electrum: %s; closing %s", message, self.remote_address())
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self.close()))

        return fail

    def _delivered(self, sub: frigate.Subscription, entries, progress: float) -> None:
        if self.subs.get(sub.address) is not sub:
            return  # unsubscribed or replaced meanwhile
        now = time.monotonic()
        if not entries and progress < 1.0 and now - sub.last_sent < frigate.MIN_PROGRESS_GAP:
            sub.progress = progress
            return
        if progress >= 1.0:
            sub.history_done = True
        sub.progress, sub.last_sent = progress, now
        for params in frigate.notifications(sub, entries, progress):
            self.notify(electrum_sp.FRIGATE_SUBSCRIBE, params)

    async def _tick(self) -> None:
        """During a history scan, a progress notification at least every PROGRESS_EVERY seconds; the
        connection closed once it has sent nothing for `limits.idle_timeout`."""
        while True:
            await asyncio.sleep(PROGRESS_TICK)
            if time.time() - self.last_recv > self.state.limits.idle_timeout:  # aiorpcx's time of the last message
                log.info("electrum: closing %s: idle for %g s", self.remote_address(), self.state.limits.idle_timeout)
                await self.close(force_after=1)
                return
            now = time.monotonic()
            for sub in list(self.subs.values()):
                if sub.opened and not sub.history_done and now - sub.last_sent >= frigate.PROGRESS_EVERY:
                    sub.last_sent = now
                    self.notify(electrum_sp.FRIGATE_SUBSCRIBE, frigate.notifications(sub, [], sub.progress)[0])

    def _drop(self, sub: frigate.Subscription) -> None:
        self.subs.pop(sub.address, None)
        if sub.watch is not None:
            self.state.scans.drop(sub.watch)

    async def sp_unsubscribe(self, args):
        scan_hex, spend_hex = frigate.named(args, ("scan_private_key", "spend_public_key"), 2)
        scan32, spend33 = frigate.parse_keys(scan_hex, spend_hex)
        address = frigate.address_of(scan32, spend33, self.state.network)
        sub = self.subs.get(address)
        if sub is not None:
            self._drop(sub)
            self._unreserve(1)
        return address

    # --- Cake ---

    async def tweaks_subscribe(self, args):
        height, count, historical, protocol = cake.parse_subscribe(args)
        marked = historical and protocol == 1
        if marked and self.backend is None:
            raise PlainError("historical mode needs the server's backend Electrum server (--electrum-backend): it says which input spent an output")
        span = await self.state.readers.run(cake.stream_range, height, count)
        if span is not None:
            lo, last = span
            for chunk_lo in range(lo, last + 1, cake.READ_BLOCKS):
                chunk_hi = min(chunk_lo + cake.READ_BLOCKS - 1, last)
                if self.is_closing():  # dropped: nothing more is read for it
                    break
                messages, spent = await self.state.readers.run(cake.stream_chunk, chunk_lo, chunk_hi, last, historical, protocol)
                if marked:
                    await cake.spend_markers(self.backend.request, spent)
                for params in messages:
                    await self.send_notification(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, [params])
        done = {"jsonrpc": "2.0", "method": electrum_sp.CAKE_TWEAKS_SUBSCRIBE, "params": [cake.done_message()]}
        await self.send_notification(electrum_sp.CAKE_TWEAKS_SUBSCRIBE, done["params"])
        return done

    async def block_tweaks(self, args):
        (height,) = frigate.named(args, ("height",), 1)
        height = cake._height(height, "height")
        try:
            return await self.state.readers.run(cake.block_tweaks, height)
        except HeightError as exc:
            raise PlainError(str(exc)) from None

    async def tweaks_get(self, args):
        txid32, vout, height = cake.parse_get(args)
        return await self.state.readers.run(cake.tweak_output, txid32, vout, height)


def _electrs_errors(method):
    """A Cake method whose errors are electrs's: the message alone (`PlainError`)."""

    async def call(session, args):
        try:
            return await method(session, args)
        except PlainError:
            raise
        except RPCError as exc:
            raise PlainError(exc.message) from None

    return call


def _package_version() -> str:
    try:
        return importlib.metadata.version("sp-scan")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _tip_height(index: Index) -> int | None:
    tip = index.tip()
    return tip[0] if tip else None


def _height_at_time(index: Index, when: int) -> int:
    """The first indexed block whose time is at or after `when` (tip + 1 when none is)."""
    tip, first = index.tip(), index.first_height
    if tip is None:
        return 0
    lo, hi = first, tip[0] + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if index.block_time(mid) >= when:
            hi = mid
        else:
            lo = mid + 1
    return lo


LOCAL = {
    "server.features": ElectrumSession.server_features,
    "server.ping": ElectrumSession.ping,
    "blockchain.headers.subscribe": ElectrumSession.headers_subscribe,
    SCRIPTHASH_SUBSCRIBE: ElectrumSession.scripthash_subscribe,
    SCRIPTHASH_UNSUBSCRIBE: ElectrumSession.scripthash_unsubscribe,
    electrum_sp.FRIGATE_SUBSCRIBE: ElectrumSession.sp_subscribe,
    electrum_sp.FRIGATE_UNSUBSCRIBE: ElectrumSession.sp_unsubscribe,
    electrum_sp.CAKE_TWEAKS_SUBSCRIBE: _electrs_errors(ElectrumSession.tweaks_subscribe),
    electrum_sp.CAKE_BLOCK_TWEAKS: _electrs_errors(ElectrumSession.block_tweaks),
    electrum_sp.CAKE_TWEAKS_GET: _electrs_errors(ElectrumSession.tweaks_get),
}
