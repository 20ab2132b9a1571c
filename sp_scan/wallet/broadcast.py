"""Broadcasting a signed transaction: through a node's RPC, a BlindBit server's /forward-tx, or an Electrum server.

`Broadcaster(url, network)` is the channel a URL names, checked to be on the wallet's network before it sends
anything; it is what `Wallet.broadcast`'s `via` takes (raw tx -> txid32, internal order, once the far side
accepted it; `ServerError` with the far side's reason otherwise). `via_rpc` and `via_forward_tx` are its
transports. An Electrum server's ssl:// certificate is checked against the system's authorities, as the
wallet's Electrum sources check it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from ..errors import ServerError, SourceURLError, WrongNetworkError
from ..node import RpcNode
from ..wire import parse_tx
from .sources.base import endpoint

TIMEOUT = 60.0
MAX_REPLY = 1 << 20
"""Bytes of a server's answer read at most."""
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _txid(raw_tx: bytes) -> bytes:
    return parse_tx(raw_tx).txid32


def _check(txid32: bytes, answer: object, who: str) -> bytes:
    if answer != txid32[::-1].hex():
        raise ServerError(f"{who} answered {str(answer)[:80]!r}, not the transaction's txid {txid32[::-1].hex()}")
    return txid32


def via_rpc(node: RpcNode, raw_tx: bytes) -> bytes:
    """`sendrawtransaction` on a Core node.

    Raises:
        MalformedDataError: raw_tx is not a transaction.
        ServerError: the node refuses it (its reason, e.g. "insufficient fee") or cannot be reached.
    """
    txid32 = _txid(raw_tx)
    return _check(txid32, node.call("sendrawtransaction", raw_tx.hex()), "the node")


def via_forward_tx(url: str, raw_tx: bytes, timeout: float = TIMEOUT) -> bytes:
    """POST `{"data": hex}` to a BlindBit server's /forward-tx (sp-scan serve relays it with sendrawtransaction).

    Raises:
        MalformedDataError: raw_tx is not a transaction.
        ServerError: the server answers an error (with its message) or cannot be reached.
    """
    txid32 = _txid(raw_tx)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError("a BlindBit URL looks like http://host:port")
    body = json.dumps({"data": raw_tx.hex()}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/forward-tx", data=body, headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(request, timeout=timeout) as reply:
            reply.read(MAX_REPLY)
    except urllib.error.HTTPError as exc:
        text = exc.read(MAX_REPLY)
        try:
            message = json.loads(text).get("error", "")
        except (ValueError, AttributeError):
            message = text[:200].decode("utf-8", "replace")
        raise ServerError(f"{url} refused the transaction: HTTP {exc.code} {message}".rstrip()) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServerError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
    return txid32


class Broadcaster:
    """The channel a URL names, for a wallet of `network`: raw tx -> txid32 (`Wallet.broadcast`'s `via`).

    Args:
        url: `rpc+http://HOST:PORT` (a node's sendrawtransaction; https too), `http://HOST:PORT` (a BlindBit server's
            POST /forward-tx; https too) or `tcp://HOST:PORT`, `ssl://HOST:PORT` (an Electrum server's
            blockchain.transaction.broadcast).
        network: the wallet's chain (Core's name).
        cookie_file, user, password: the node's RPC credentials (rpc+http:// only).
        timeout: seconds to wait for the far side.

    Raises:
        SourceURLError: another URL, or credentials for a channel that is not a node.
    """

    def __init__(
        self, url: str, network: str, *, cookie_file: str | None = None, user: str | None = None, password: str | None = None, timeout: float = TIMEOUT,
    ) -> None:  # fmt: skip
        self.url, self.network = url, network
        self._checked = False
        scheme = url.partition("://")[0]
        if (cookie_file or user or password) and not scheme.startswith("rpc+"):
            raise SourceURLError("RPC credentials go with an rpc+http:// broadcaster")
        self._chain: Callable[[], str]
        self._send: Callable[[bytes], bytes]
        if scheme in ("rpc+http", "rpc+https"):
            node = RpcNode(url.removeprefix("rpc+"), cookie_file, user, password, timeout)
            self.name = f"the node at {node.url}"
            self._chain, self._send = node.chain, lambda raw: via_rpc(node, raw)
        elif scheme in ("http", "https"):
            from .sources.blindbit import BlindBitSource

            server = BlindBitSource(url, timeout=timeout)
            self.name = server.name
            self._chain, self._send = server.network, lambda raw: via_forward_tx(url, raw, timeout)
        else:
            from .sources.electrum import ElectrumClient
            from .sources.electrum import network as electrum_network

            scheme, host, port = endpoint(url, ("tcp", "ssl"), "a broadcaster (rpc+http://, http:// or tcp://, ssl://)")
            client = ElectrumClient(host, port, scheme == "ssl", timeout=timeout)
            self.name = f"the Electrum server at {client.url}"
            self._chain = lambda: electrum_network(client)
            self._send = lambda raw: _check(_txid(raw), client.call("blockchain.transaction.broadcast", [raw.hex()]), self.name)
            self._client = client

    def __call__(self, raw_tx: bytes) -> bytes:
        """Send `raw_tx`, once the channel said it is on the wallet's network (asked once).

        Returns:
            Its txid32.

        Raises:
            WrongNetworkError: the channel is on another network (nothing is sent).
            MalformedDataError: raw_tx is not a transaction.
            ServerError: the far side refuses it (its reason) or cannot be reached.
            SourceError: the far side's answer about its network does not parse.
        """
        if not self._checked:
            chain = self._chain()
            if chain != self.network:
                raise WrongNetworkError(f"{self.name} is on {chain}, the wallet on {self.network}: nothing was sent")
            self._checked = True
        return self._send(bytes(raw_tx))

    def close(self) -> None:
        """Close its connection (an Electrum server's)."""
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()

    def __enter__(self) -> Broadcaster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
