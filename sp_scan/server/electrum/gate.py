"""Per-client caps of the Electrum listener: connections and subscriptions counted by IP group.

Clients are grouped by IPv4 address or by IPv6 /64 prefix (one IPv6 allocation is usually a whole
/64, so a per-address count would be evaded inside it); an IPv4-mapped IPv6 address counts as its
IPv4 address. Clients from exempt networks (loopback by default) are only held to the totals.
Every method runs on the event loop's thread: no locks.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def ip_group(host: str) -> str:
    """The group a client address counts in: the IPv4 address, or the IPv6 /64 network ("2001:db8::/64")."""
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv6Address) and not address.is_loopback:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(frozen=True, slots=True)
class Admission:
    """A client admitted by `IpGate.admit`: its group and whether the per-group caps skip it."""

    group: str
    exempt: bool


class IpGate:
    """Counts connections and subscriptions, in total and per IP group, within caps.

    Args:
        max_connections, max_connections_per_ip: connection caps (total, per group).
        max_subscriptions, max_subscriptions_per_ip: subscription caps (total, per group).
        exempt: networks whose clients skip the per-group caps.
    """

    def __init__(
        self,
        max_connections: int = 10_000,
        max_connections_per_ip: int = 100,
        max_subscriptions: int = 100_000,
        max_subscriptions_per_ip: int = 1_000,
        exempt: tuple = LOOPBACK,
    ) -> None:
        self.max_connections, self.max_connections_per_ip = max_connections, max_connections_per_ip
        self.max_subscriptions, self.max_subscriptions_per_ip = max_subscriptions, max_subscriptions_per_ip
        self.exempt = exempt
        self.connections = _Counts()
        self.subscriptions = _Counts()

    def _is_exempt(self, host: str) -> bool:
        address = ipaddress.ip_address(host.split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.exempt)

    def admit(self, host: str) -> Admission | None:
        """Count a new connection from `host`; None when a cap refuses it (nothing is counted then)."""
        admission = Admission(ip_group(host), self._is_exempt(host))
        if not self.connections.take(admission, self.max_connections, self.max_connections_per_ip):
            return None
        return admission

    def release(self, admission: Admission) -> None:
        """Forget a connection `admit` counted."""
        self.connections.give(admission.group, 1)

    def reserve_subscription(self, admission: Admission) -> bool:
        """Count one more subscription for the client's group; False (nothing counted) over a cap."""
        return self.subscriptions.take(admission, self.max_subscriptions, self.max_subscriptions_per_ip)

    def release_subscriptions(self, admission: Admission, count: int) -> None:
        """Forget `count` subscriptions `reserve_subscription` counted."""
        if count > 0:
            self.subscriptions.give(admission.group, count)


class _Counts:
    """Counts per group and their total."""

    def __init__(self) -> None:
        self.by_group: dict[str, int] = {}
        self.total = 0

    def of(self, group: str) -> int:
        return self.by_group.get(group, 0)

    def take(self, admission: Admission, total_cap: int, group_cap: int) -> bool:
        current = self.of(admission.group)
        if self.total >= total_cap or (not admission.exempt and current >= group_cap):
            return False
        self.by_group[admission.group] = current + 1
        self.total += 1
        return True

    def give(self, group: str, count: int) -> None:
        current = self.of(group)
        count = min(count, current)
        self.total -= count
        if current > count:
            self.by_group[group] = current - count
        else:
            self.by_group.pop(group, None)
