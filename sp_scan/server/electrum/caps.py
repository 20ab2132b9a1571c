"""The Electrum listener's subscription caps, on top of the process's `limits.Gate`.

Connections and requests of Electrum clients count in the Gate that every listener shares (per
address group and in total); subscriptions exist only here, so they are counted here: per address
group (the `Ticket.group` the Gate gave the connection: IPv4 address or IPv6 /64) and in total.
A ticket the Gate exempts (loopback by default) skips the per-group cap, as it skips the Gate's.
Silent-payments and scripthash subscriptions count alike (Frigate's ConnectionGate counts
scripthash ones). Every method runs on the event loop's thread: no locks.
"""

from __future__ import annotations

from ..limits import Ticket


class SubscriptionCaps:
    """Subscriptions in total and per address group, within caps.

    Args:
        per_ip: subscriptions of one address group (exempt tickets skip it).
        total: subscriptions of every client together.
    """

    def __init__(self, per_ip: int = 1_000, total: int = 100_000) -> None:
        self.per_ip, self.total_cap = per_ip, total
        self.by_group: dict[str, int] = {}
        self.total = 0

    def take(self, ticket: Ticket) -> bool:
        """Count one more subscription of the ticket's group; False (nothing counted) over a cap."""
        current = self.by_group.get(ticket.group, 0)
        if self.total >= self.total_cap or (not ticket.exempt and current >= self.per_ip):
            return False
        self.by_group[ticket.group] = current + 1
        self.total += 1
        return True

    def give(self, ticket: Ticket, count: int) -> None:
        """Forget `count` subscriptions `take` counted for the ticket's group."""
        current = self.by_group.get(ticket.group, 0)
        count = min(count, current)
        if count <= 0:
            return
        self.total -= count
        if current > count:
            self.by_group[ticket.group] = current - count
        else:
            del self.by_group[ticket.group]
