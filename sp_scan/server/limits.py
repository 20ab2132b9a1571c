"""Per-IP and total limits for every listener of `sp-scan serve` (HTTP, gRPC, and any other).

One `Gate` per process is shared by its listeners (HTTP, gRPC, Electrum): it counts open
connections in total and per client address group (an IPv4 address, or an IPv6 /64: one host
usually holds a whole /64), and keeps a token bucket of requests per second for each group, so a
group flooding one listener is limited on the others too. A listener asks it on accept and before
each request, and gives the connection back when it closes:

```python
gate = Gate(Limits(), listeners=("http", "grpc", "electrum"))
ticket = gate.admit("http", peer_ip)          # None: refused (gate.refusal(...) says why)
if ticket is not None:
    if gate.allow_request(ticket):            # False: over the group's req/s, answer 429
        ...
    gate.release(ticket)                      # on close, exactly once
```

Clients from `Limits.per_ip_exempt` (127.0.0.1 and ::1 by default: a reverse proxy or Tor on the
same machine, whose clients all arrive from there) skip the per-group caps, on every listener
alike, and count in the total only. `Ticket.group` and `Ticket.exempt` are what a listener's own
per-group caps key on (the Electrum listener's subscriptions).

`Limits` carries the timeouts and size caps too; the listeners apply them to their own
protocol (the HTTP server in `http.py`, the gRPC front in `v2.py`, the Electrum listener in
`electrum/`). Nothing here does I/O except `raise_fd_limit`. Everything runs on one event loop
thread (no locks).
"""

from __future__ import annotations

import ipaddress
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

FD_RESERVE = 128
"""File descriptors kept for everything that is not a client connection (the index, logs, threads, gRPC)."""
LOOPBACK = ("127.0.0.1/32", "::1/128")
"""Exempt from the per-group caps by default (as Frigate's ConnectionGate): the address a local proxy connects from."""
_BUCKETS_MAX = 100_000
"""Token buckets kept before idle ones are forgotten (an address space scan must not grow memory)."""


@dataclass(frozen=True)
class Limits:
    """What each listener allows; 0 means no limit for the connection and rate fields.

    Attributes:
        max_connections: open client connections in total, over every listener (further capped
            below the file-descriptor limit by `Gate`).
        per_ip_connections: open connections of one address group (an IPv4 address or an IPv6 /64).
        per_ip_rate: requests per second of one group (a token bucket), each listener's requests counted
            (an HTTP request, a gRPC call, a JSON-RPC call).
        per_ip_burst: the bucket's size: requests a group may send at once after a quiet time.
        per_ip_exempt: networks (CIDR text) whose clients skip the per-group caps (connections, rate,
            and a listener's own per-group caps); they count in the total. () for none.
        header_timeout: seconds a client has to send a whole request head, once it started one.
        idle_timeout: seconds a connection may stay open with no request in progress.
        write_timeout: seconds an answer may sit unsent (a client that does not read) before the
            connection is dropped and its buffered bytes freed.
        max_header_bytes: a request line and its headers, in bytes.
        max_headers: header fields in one request.
        max_body_bytes: a request body (only POST /forward-tx has one).
    """

    max_connections: int = 4096
    per_ip_connections: int = 256
    per_ip_rate: float = 2000.0
    per_ip_burst: int = 4000
    per_ip_exempt: tuple[str, ...] = LOOPBACK
    header_timeout: float = 10.0
    idle_timeout: float = 60.0
    write_timeout: float = 30.0
    max_header_bytes: int = 8192
    max_headers: int = 64
    max_body_bytes: int = 400_000


def _address(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The client's address (an IPv4-mapped IPv6 one as IPv4, a zone index dropped), None when `ip` does not parse."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def ip_group(ip: str) -> str:
    """The address group limits count under: the IPv4 address, or the /64 network of an IPv6 one.

    An IPv4-mapped IPv6 address (::ffff:a.b.c.d, from a dual-stack socket) is its IPv4 address.
    Anything that does not parse (a Unix socket peer) is its own group.
    """
    address = _address(ip)
    return ip if address is None else _group(address)


def _group(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def exempt_networks(texts: Iterable[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """The networks of `Limits.per_ip_exempt` (host bits allowed: "10.0.0.1/8" is 10.0.0.0/8).

    Raises:
        ValueError: one is not an IPv4 or IPv6 network (the message names it).
    """
    networks = []
    for text in texts:
        try:
            networks.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{text!r} is not an IPv4 or IPv6 network (CIDR, e.g. 127.0.0.1/32)") from None
    return tuple(networks)


def raise_fd_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit; return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft if soft != resource.RLIM_INFINITY else 1 << 20
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):  # a hard limit the kernel will not grant (above fs.nr_open)
        return soft
    return target


def connection_cap(wanted: int, fd_limit: int, reserve: int = FD_RESERVE) -> int:
    """The total connection cap actually used: `wanted` (0: as many as fit) kept below fd_limit - reserve."""
    room = max(fd_limit - reserve, 1)
    return room if wanted <= 0 else min(wanted, room)


@dataclass
class _Bucket:
    tokens: float
    stamp: float


@dataclass
class Ticket:
    """One admitted connection: its listener, address group and whether the per-group caps skip it
    (give it back with `Gate.release`)."""

    listener: str
    group: str
    exempt: bool = False
    released: bool = False


@dataclass
class GateStats:
    """Counters for the operator's view (monotonic since start, except `open`)."""

    open: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)
    refused_total: int = 0
    refused_per_ip: int = 0
    rate_limited: int = 0


class Gate:
    """Connection counts and request buckets shared by a process's listeners.

    Args:
        limits: the limits.
        listeners: the names the listeners use (counted separately in `stats.open`).
        fd_limit: the open-files limit the total cap must stay under (default: raise the soft
            limit to the hard one and use it).
        clock: seconds, monotonic (tests pass their own).

    Raises:
        ValueError: a network of `limits.per_ip_exempt` does not parse.
    """

    def __init__(self, limits: Limits, listeners: Iterable[str] = ("http",), fd_limit: int | None = None, clock=time.monotonic) -> None:
        self.limits = limits
        self.exempt = exempt_networks(limits.per_ip_exempt)
        self.fd_limit = raise_fd_limit() if fd_limit is None else fd_limit
        self.max_connections = connection_cap(limits.max_connections, self.fd_limit)
        self.stats = GateStats(open={name: 0 for name in listeners}, accepted={name: 0 for name in listeners})
        self._per_group: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._clock = clock

    @property
    def open_connections(self) -> int:
        return sum(self.stats.open.values())

    def classify(self, ip: str) -> tuple[str, bool]:
        """(the address group of `ip`, whether it is in a `per_ip_exempt` network)."""
        address = _address(ip)
        if address is None:
            return ip, False
        return _group(address), any(address in network for network in self.exempt)

    def refusal(self, ip: str) -> str | None:
        """Why a new connection from `ip` would be refused now ("total" or "per-ip"), None if it would not."""
        return self._refusal(*self.classify(ip))

    def _refusal(self, group: str, exempt: bool) -> str | None:
        if self.open_connections >= self.max_connections:
            return "total"
        per_ip = self.limits.per_ip_connections
        if per_ip and not exempt and self._per_group.get(group, 0) >= per_ip:
            return "per-ip"
        return None

    def admit(self, listener: str, ip: str) -> Ticket | None:
        """Count a new connection of `listener` from `ip`; None (and counted as refused) when over a cap."""
        group, exempt = self.classify(ip)
        reason = self._refusal(group, exempt)
        if reason is not None:
            if reason == "total":
                self.stats.refused_total += 1
            else:
                self.stats.refused_per_ip += 1
            return None
        self._per_group[group] = self._per_group.get(group, 0) + 1
        self.stats.open[listener] = self.stats.open.get(listener, 0) + 1
        self.stats.accepted[listener] = self.stats.accepted.get(listener, 0) + 1
        return Ticket(listener, group, exempt)

    def release(self, ticket: Ticket) -> None:
        """Give back an admitted connection (a second release of the same ticket does nothing)."""
        if ticket.released:
            return
        ticket.released = True
        self.stats.open[ticket.listener] -= 1
        left = self._per_group[ticket.group] - 1
        if left:
            self._per_group[ticket.group] = left
        else:
            del self._per_group[ticket.group]

    def allow_request(self, ticket: Ticket, cost: int = 1) -> bool:
        """Take `cost` tokens (at most the burst) from the ticket's group; False (counted as rate limited)
        when its bucket holds fewer. An exempt ticket is always allowed."""
        rate = self.limits.per_ip_rate
        if rate <= 0 or ticket.exempt:
            return True
        now = self._clock()
        burst = max(self.limits.per_ip_burst, 1)
        cost = min(cost, burst)
        bucket = self._buckets.get(ticket.group)
        if bucket is None:
            if len(self._buckets) >= _BUCKETS_MAX:
                self._forget_full(now)
            bucket = self._buckets[ticket.group] = _Bucket(float(burst), now)
        else:
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
            bucket.stamp = now
        if bucket.tokens < cost:
            self.stats.rate_limited += 1
            return False
        bucket.tokens -= cost
        return True

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled completely (they hold nothing a new bucket would not)."""
        rate, burst = self.limits.per_ip_rate, max(self.limits.per_ip_burst, 1)
        for group in [g for g, b in self._buckets.items() if b.tokens + (now - b.stamp) * rate >= burst]:
            del self._buckets[group]
        if len(self._buckets) >= _BUCKETS_MAX:  # all busy: forget the oldest half
            for group in sorted(self._buckets, key=lambda g: self._buckets[g].stamp)[: _BUCKETS_MAX // 2]:
                del self._buckets[group]


class RateLimitedLog:
    """Pass at most one line per `every` seconds for each kind; count what was held back.

    `__call__(kind, line)` returns the line to log (with how many of that kind were held back
    since the last one), or None.
    """

    def __init__(self, every: float = 10.0, clock=time.monotonic) -> None:
        self.every, self._clock = every, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def __call__(self, kind: str, line: str) -> str | None:
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.every:
            self._held[kind] = self._held.get(kind, 0) + 1
            return None
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        return f"{line} (and {held} more like it in {now - last:.0f} s)" if held and last is not None else line
