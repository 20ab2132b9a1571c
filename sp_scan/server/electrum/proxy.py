"""The backend Electrum server (electrs, Fulcrum, ElectrumX) behind every method sp-scan does not answer itself.

Each client gets its own backend connection, so the backend's per-connection state (negotiated
version, subscriptions) is the client's. Notifications from the backend (headers, scripthash
statuses) are relayed to the client unchanged. A backend that goes away is reconnected in the
background with a growing pause; meanwhile requests fail at once with Frigate's -32000 "Backend
Electrum server unavailable" (never a hang), and once it is back the version and the client's
subscriptions are sent again, and a status that changed meanwhile is relayed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiorpcx import NewlineFramer, Notification, RPCError, RPCSession, TaskTimeout, connect_rs

log = logging.getLogger("sp_scan.server.electrum")

UNAVAILABLE = -32000
"""Frigate's BackendUnavailableException code."""
METHOD_NOT_FOUND = -32601
REQUEST_TIMEOUT = 30.0
RECONNECT_MIN, RECONNECT_MAX = 0.5, 30.0
MAX_BACKEND_MESSAGE = 64 * 1024 * 1024
"""The backend is trusted: its answers (header batches, long histories) may be large."""


class DataError(RPCError):
    """An RPCError whose JSON error object also has a `data` member."""

    def __init__(self, code: int, message: str, data, cost: float = 0.0) -> None:
        super().__init__(code, message, cost=cost)
        self.data = data


def unavailable(reason: str) -> DataError:
    # the client's requests did nothing wrong: aiorpcx must not bill them (an error costs error_base_cost + cost)
    return DataError(UNAVAILABLE, "Backend Electrum server unavailable", reason, cost=-RPCSession.error_base_cost)


@dataclass(frozen=True, slots=True)
class BackendUrl:
    """Where the backend listens: `tcp://HOST:PORT` or `ssl://HOST:PORT`."""

    host: str
    port: int
    tls: bool

    @classmethod
    def parse(cls, url: str) -> BackendUrl:
        """Raises ValueError for anything but tcp:// or ssl:// with a host and a port."""
        parts = urlsplit(url)
        if parts.scheme not in ("tcp", "ssl") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"backend must be tcp://HOST:PORT or ssl://HOST:PORT, not {url[:80]!r}")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not port:
            raise ValueError(f"backend {url[:80]!r} has no port")
        return cls(parts.hostname, port, parts.scheme == "ssl")

    def __str__(self) -> str:
        return f"{'ssl' if self.tls else 'tcp'}://{self.host}:{self.port}"


class _BackendSession(RPCSession):
    sent_request_timeout = REQUEST_TIMEOUT

    def __init__(self, *args, on_notification, on_lost, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._on_notification, self._on_lost = on_notification, on_lost

    def default_framer(self):
        return NewlineFramer(max_size=MAX_BACKEND_MESSAGE)

    async def handle_request(self, request):
        if isinstance(request, Notification):
            await self._on_notification(request.method, request.args)

    async def connection_lost(self) -> None:
        await super().connection_lost()
        self._on_lost(self)


Relay = Callable[[str, object], Awaitable[None]]


class Backend:
    """One client's connection to the backend.

    Args:
        url: the backend.
        relay: called with (method, params) of each backend notification, for the client.
    """

    def __init__(self, url: BackendUrl, relay: Relay) -> None:
        self.url, self.relay = url, relay
        self._session: _BackendSession | None = None
        self._version_args: list | None = None
        self._headers = False
        self.statuses: dict[str, object] = {}
        """Scripthash -> last status the client saw: resubscribed after a reconnect."""
        self._reconnecting: asyncio.Task | None = None
        self._closed = False
        self.reason = "not connected yet"

    @property
    def connected(self) -> bool:
        return self._session is not None and not self._session.is_closing()

    def _tls(self) -> ssl.SSLContext | None:
        if not self.url.tls:
            return None
        context = ssl.create_default_context()
        context.check_hostname = False  # a co-located backend with a self-signed certificate
        context.verify_mode = ssl.CERT_NONE
        return context

    async def connect(self) -> bool:
        """One attempt to connect (and to renew the version and subscriptions); False when it failed."""
        try:
            client = connect_rs(
                self.url.host,
                self.url.port,
                ssl=self._tls(),
                session_factory=lambda transport: _BackendSession(transport, on_notification=self._notified, on_lost=self._lost),
            )
            _, protocol = await asyncio.wait_for(client.create_connection(), REQUEST_TIMEOUT)
            session = protocol.session
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
            self.reason = f"cannot connect to {self.url}: {exc}"
            return False
        if self._closed:
            await session.close()
            return False
        self._session = session
        try:
            await self._renew()
        except RPCError as exc:
            self.reason = f"{self.url} did not resume the session: {exc.message}"
            self._session = None
            await session.close(force_after=1)
            return False
        return True

    async def _renew(self) -> None:
        """After a reconnect: the same version, then every subscription the client had."""
        if self._version_args is not None:
            await self.request("server.version", self._version_args)
        if self._headers:
            header = await self.request("blockchain.headers.subscribe", [])
            await self.relay("blockchain.headers.subscribe", [header])
        for scripthash, old in list(self.statuses.items()):
            status = await self.request("blockchain.scripthash.subscribe", [scripthash])
            if status != old:
                self.statuses[scripthash] = status
                await self.relay("blockchain.scripthash.subscribe", [scripthash, status])

    async def _notified(self, method: str, args) -> None:
        if method == "blockchain.scripthash.subscribe" and isinstance(args, list) and len(args) == 2 and isinstance(args[0], str):
            if args[0] not in self.statuses:
                return  # unsubscribed meanwhile
            self.statuses[args[0]] = args[1]
        await self.relay(method, args)

    def _lost(self, session: _BackendSession) -> None:
        if session is not self._session or self._closed:
            return
        self._session = None
        self.reason = f"the connection to {self.url} was lost"
        log.info("electrum backend: %s; reconnecting", self.reason)
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        pause = RECONNECT_MIN
        while not self._closed and not await self.connect():
            await asyncio.sleep(pause)
            pause = min(2 * pause, RECONNECT_MAX)

    def start_reconnecting(self) -> None:
        """Keep trying to connect in the background (after a failed first attempt)."""
        if not self._closed and (self._reconnecting is None or self._reconnecting.done()):
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def request(self, method: str, args):
        """Send a request to the backend and return its result.

        Raises:
            RPCError: the backend's own error, or -32000 when it is unreachable or too slow.
        """
        session = self._session
        if session is None or session.is_closing():
            raise unavailable(self.reason)
        try:
            return await session.send_request(method, args)
        except TaskTimeout:
            raise unavailable(f"no answer from {self.url} within {REQUEST_TIMEOUT:g} s") from None
        except (OSError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and not session.is_closing():
                raise
            raise unavailable(self.reason if self._session is None else str(exc)) from None

    async def version(self, args: list):
        """Negotiate the version with the backend (remembered for reconnects); returns its answer."""
        result = await self.request("server.version", args)
        self._version_args = args
        return result

    async def subscribe_headers(self):
        result = await self.request("blockchain.headers.subscribe", [])
        self._headers = True
        return result

    async def close(self) -> None:
        """Close the connection and stop reconnecting."""
        self._closed = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close(force_after=1)
