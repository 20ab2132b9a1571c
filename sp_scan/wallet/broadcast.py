"""Broadcasting a signed transaction: through a node's RPC, a BlindBit server's /forward-tx, or an Electrum server.

Each function takes the raw transaction, returns its txid32 (internal order) once the far side
accepted it, and raises `NodeError` with the far side's reason otherwise. Only the standard
library is used. A transaction is public data: an Electrum server's ssl:// certificate is not
checked (they are usually self-signed), so that channel guards the connection from being read,
not from being answered by someone else.
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request

from ..errors import NodeError
from ..node import RpcNode
from ..wire import parse_tx

TIMEOUT = 60.0
MAX_REPLY = 1 << 20
"""Bytes of a server's answer read at most."""
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _txid(raw_tx: bytes) -> bytes:
    return parse_tx(raw_tx).txid32


def _check(txid32: bytes, answer: object, who: str) -> bytes:
    if answer != txid32[::-1].hex():
        raise NodeError(f"{who} answered {str(answer)[:80]!r}, not the transaction's txid {txid32[::-1].hex()}")
    return txid32


def via_rpc(node: RpcNode, raw_tx: bytes) -> bytes:
    """`sendrawtransaction` on a Core node.

    Raises:
        MalformedDataError: raw_tx is not a transaction.
        NodeError: the node refuses it (its reason, e.g. "insufficient fee") or cannot be reached.
    """
    txid32 = _txid(raw_tx)
    return _check(txid32, node.call("sendrawtransaction", raw_tx.hex()), "the node")


def via_forward_tx(url: str, raw_tx: bytes, timeout: float = TIMEOUT) -> bytes:
    """POST `{"data": hex}` to a BlindBit server's /forward-tx (sp-scan serve relays it with sendrawtransaction).

    Raises:
        MalformedDataError: raw_tx is not a transaction.
        NodeError: the server answers an error (with its message) or cannot be reached.
    """
    txid32 = _txid(raw_tx)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NodeError("a BlindBit URL looks like http://host:port")
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
        raise NodeError(f"{url} refused the transaction: HTTP {exc.code} {message}".rstrip()) from None
    except (urllib.error.URLError, OSError) as exc:
        raise NodeError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
    return txid32


def via_electrum(url: str, raw_tx: bytes, timeout: float = TIMEOUT) -> bytes:
    """`blockchain.transaction.broadcast` on an Electrum server (tcp://HOST:PORT or ssl://HOST:PORT), after `server.version`.

    Raises:
        MalformedDataError: raw_tx is not a transaction.
        NodeError: a bad URL, the server refuses it (its message) or cannot be reached.
    """
    txid32 = _txid(raw_tx)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("tcp", "ssl") or not parts.hostname or parts.port is None:
        raise NodeError("an Electrum URL looks like tcp://host:port or ssl://host:port")
    hello = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "server.version", "params": ["sp-scan", "1.4"]}).encode() + b"\n"
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "blockchain.transaction.broadcast", "params": [raw_tx.hex()]}).encode() + b"\n"
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
            conn = sock
            if parts.scheme == "ssl":
                context = ssl.create_default_context()
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
                conn = context.wrap_socket(sock, server_hostname=parts.hostname)
            conn.sendall(hello)
            _line(conn)  # the version handshake servers ask for first
            conn.sendall(request)
            reply = _line(conn)
    except OSError as exc:
        raise NodeError(f"cannot reach the Electrum server at {url}: {exc.strerror or exc}") from None
    try:
        answer = json.loads(reply)
    except ValueError:
        raise NodeError(f"the Electrum server at {url} did not answer JSON") from None
    if not isinstance(answer, dict) or answer.get("id") != 1:
        raise NodeError(f"the Electrum server at {url} did not answer the request")
    if answer.get("error"):
        error = answer["error"]
        raise NodeError(f"the Electrum server refused the transaction: {error.get('message', error) if isinstance(error, dict) else error}")
    return _check(txid32, answer.get("result"), "the Electrum server")


def _line(conn: socket.socket) -> bytes:
    """One newline-terminated answer of at most MAX_REPLY bytes."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REPLY:
            raise NodeError("the Electrum server's answer is too long")
    return data
