"""Fetch blocks and their spent outputs from a Bitcoin Core node (REST or JSON-RPC).

Both clients give the same four calls: `chain()` (Core's chain name),
`tip_height()`, `block_hash(height)` (display hex) and `block(hash_hex)` ->
(block_bytes, spent_bytes), the spent outputs in Core's REST binary form as
`sp_scan.wire` parses. For the mempool (`sp_scan.index.mempool`) both also give
`mempool_txids()`, `transactions(txids32)` and `utxos(outpoints36)`, batched: REST
pipelined over a few kept-alive connections, RPC as JSON-RPC batch requests.
Only the standard library is used. Every failure raises `ServerError`;
credentials never appear in messages. `fetch_block` and `block_data` are how the index's sync and the
wallet's node source take a block from any such source (Core's block files included), retried and checked.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from . import block, formats, wire
from .errors import MalformedDataError, ServerConfigError, ServerError, SPError
from .retry import Retry
from .types import BlockData

DEFAULT_TIMEOUT = 120.0
MAX_GETUTXOS_OUTPOINTS = 15
"""Core's REST getutxos answers at most this many outpoints per request."""
REST_THREADS = 4
"""Connections a RestNode keeps open for the mempool's many small requests."""
PIPELINE = 64
"""Requests sent on a connection before their replies are read (HTTP/1.1 pipelining, which Core's server
answers in order), fewer when they would pass PIPELINE_BYTES."""
PIPELINE_BYTES = 32 << 10
"""Request bytes sent before replies are read: well within what the kernel buffers, so sending never waits
for a server that waits for its replies to be read."""
_MAX_HEADERS = 100
RPC_BATCH = 1000
"""Calls per JSON-RPC batch request."""
_MAX_ERROR_TEXT = 200
_REST_HINT = " (is the node started with -rest? spenttxouts needs Core 30+)"
_PRUNED_HINT = " (the node has pruned this block: scan it from an unpruned node, or keep more blocks with a larger -prune)"
# Nodes are reached directly: proxy settings from the environment are not applied.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch_block(source, height: int, retry: Retry, cancel: threading.Event | None = None) -> tuple[str, bytes, bytes]:
    """A source's block at `height`: (hash hex, block bytes, spent outputs bytes), each call retried by `retry`
    (not once `cancel` is set). `source` has `block_hash(height)` and `block(hash_hex)`: a node, Core's block files.

    Raises:
        ServerError: the source fails after the retries.
    """
    hash_hex = retry.call(source.block_hash, height, cancel=cancel)
    raw, spent = retry.call(source.block, hash_hex, cancel=cancel)
    return hash_hex, raw, spent


def block_data(height: int, hash_hex: str, raw: bytes, spent: bytes) -> BlockData:
    """`block.block_index` of a block fetched as `hash_hex` at `height`, checked to be that block.

    Raises:
        ServerError: the block's hash is another.
        MalformedDataError, PrevoutsError: the block or its spent outputs are bad (the message names the height).
    """
    try:
        data = block.block_index(raw, spent)
    except SPError as exc:
        raise type(exc)(f"block {height} ({hash_hex}): {exc}") from None
    if data.hash32[::-1].hex() != hash_hex:
        raise ServerError(f"asked for block {hash_hex} at height {height}, got {data.hash32[::-1].hex()}")
    return data


def _split_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """Return (url without user info, (user, password) from it or None)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError("a node URL must look like http://host:port")
    auth = None
    if parts.username is not None:
        auth = (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or ""))
    netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    if ":" in parts.hostname:
        netloc = f"[{parts.hostname}]" + ("" if parts.port is None else f":{parts.port}")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")), auth


def _hash_hex(text: str, what: str) -> str:
    try:
        raw = formats.from_hex(text, what)
    except MalformedDataError as exc:
        raise ServerError(str(exc)) from None
    if len(raw) != 32:
        raise ServerError(f"{what}: expected a 32-byte block hash")
    return raw.hex()


def _txids(listed: object, what: str) -> list[bytes]:
    """The txids32 of a JSON array of display-hex txids."""
    try:
        if not isinstance(listed, list):
            raise MalformedDataError(f"{what}: not a list of txids")
        return [bytes.fromhex(_hash_hex(t if isinstance(t, str) else "", "txid"))[::-1] for t in listed]
    except MalformedDataError as exc:
        raise ServerError(str(exc)) from None


def _tip_height(height: int, what: str) -> int:
    """A node's tip height, refused when negative (Core counts from its genesis block, height 0)."""
    if height < 0:
        raise ServerError(f"{what} is {height}, not a height")
    return height


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip().splitlines()
    return text[0][:_MAX_ERROR_TEXT] if text else ""


class RestNode:
    """Core's REST interface (`-rest`), unauthenticated.

    Args:
        url: the node's base URL, e.g. http://127.0.0.1:8332.
        timeout: seconds per request.

    Raises:
        ServerError: the URL is not http(s).
    """

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url, _ = _split_url(url)
        self.timeout = timeout

    def get(self, path: str) -> bytes:
        """GET url + path; raise ServerError unless the node answers 200."""
        target = self.url + path
        try:
            with _OPENER.open(target, timeout=self.timeout) as reply:
                return reply.read()
        except urllib.error.HTTPError as exc:
            detail = _first_line(exc.read())
            hint = (_PRUNED_HINT if "pruned" in detail else _REST_HINT) if exc.code == 404 else ""
            raise ServerError(f"REST {path}: HTTP {exc.code} {detail}{hint}".rstrip()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(f"cannot reach the node at {self.url}: {reason}") from None

    def _chaininfo(self, field: str, kind: type) -> object:
        try:
            value = json.loads(self.get("/rest/chaininfo.json"))[field]
        except (ValueError, KeyError, TypeError):
            raise ServerError("REST /rest/chaininfo.json: unexpected reply") from None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ServerError(f"REST /rest/chaininfo.json: `{field}` is not {'an integer' if kind is int else 'a string'}")
        return value

    def chain(self) -> str:
        """Core's name of the node's chain: main, test, testnet4, signet or regtest (`/rest/chaininfo.json`)."""
        return self._chaininfo("chain", str)

    def tip_height(self) -> int:
        """The height of the node's best block (`/rest/chaininfo.json`)."""
        return _tip_height(self._chaininfo("blocks", int), "REST /rest/chaininfo.json: `blocks`")

    def block_hash(self, height: int) -> str:
        """The display-hex hash of the active chain's block at `height`."""
        return _hash_hex(self.get(f"/rest/blockhashbyheight/{height}.hex").decode("ascii", "replace"), "block hash")

    def block(self, hash_hex: str) -> tuple[bytes, bytes]:
        """(raw block, spent outputs) from `/rest/block/<hash>.bin` and `/rest/spenttxouts/<hash>.bin`."""
        hash_hex = _hash_hex(hash_hex, "block hash")
        return self.get(f"/rest/block/{hash_hex}.bin"), self.get(f"/rest/spenttxouts/{hash_hex}.bin")

    def __getstate__(self) -> dict:  # workers get the URL, not this process's connections
        return {k: v for k, v in self.__dict__.items() if k not in ("_kept", "_pool")}

    def _get_many(self, paths: Sequence[str]) -> list[tuple[int, bytes]]:
        """(status, body) of GET url + path for each path, in order: the paths are shared among REST_THREADS
        kept-alive connections, each sending PIPELINE requests before reading their replies.

        Raises:
            ServerError: unreachable, or a reply that is not HTTP.
        """
        if len(paths) <= PIPELINE:
            return self._connection().get_many(paths)
        pool = self.__dict__.get("_pool")
        if pool is None:
            pool = self.__dict__["_pool"] = concurrent.futures.ThreadPoolExecutor(REST_THREADS, thread_name_prefix="sp-scan-rest")
        share = -(-len(paths) // REST_THREADS)
        parts = pool.map(lambda lo: self._connection().get_many(paths[lo : lo + share]), range(0, len(paths), share))
        return [reply for part in parts for reply in part]

    def _connection(self) -> _Pipelined:
        """This thread's kept-alive connection to the node."""
        kept = self.__dict__.setdefault("_kept", threading.local())
        if getattr(kept, "conn", None) is None:
            kept.conn = _Pipelined(self.url, self.timeout)
        return kept.conn

    def _ok(self, path: str, status: int, body: bytes) -> bytes:
        if status != 200:
            raise ServerError(f"REST {path}: HTTP {status} {_first_line(body)}".rstrip())
        return body

    def mempool_txids(self) -> list[bytes]:
        """The txids32 (internal order) in the node's mempool (`/rest/mempool/contents.json?verbose=false`).

        Raises:
            ServerError: unreachable, an error reply, or a reply that is not a list of txids.
        """
        path = "/rest/mempool/contents.json?verbose=false"
        try:
            listed = formats.load_json(self._ok(path, *self._get_many([path])[0]), f"REST {path}")
        except MalformedDataError as exc:
            raise ServerError(str(exc)) from None
        return _txids(listed, f"REST {path}")

    def transactions(self, txids32: Sequence[bytes]) -> dict[bytes, bytes]:
        """The raw txs the node has of `txids32` (`/rest/tx/<txid>.bin`: mempool txs, and confirmed
        ones with -txindex); a txid it does not have (404) is left out.

        Raises:
            ServerError: unreachable, or another error reply.
        """
        paths = [f"/rest/tx/{t[::-1].hex()}.bin" for t in txids32]
        return {t: self._ok(path, status, body) for t, path, (status, body) in zip(txids32, paths, self._get_many(paths)) if status != 404}

    def utxos(self, outpoints36: Sequence[bytes]) -> list[wire.TxOut | None]:
        """Each outpoint's output in the UTXO set of the node's tip, or None (`/rest/getutxos/<txid>-<n>/….bin`,
        15 per request, without checkmempool: outputs that mempool txs spend are still given).

        Raises:
            ServerError: unreachable, an error reply, or a reply that does not parse.
        """
        chunks = [outpoints36[i : i + MAX_GETUTXOS_OUTPOINTS] for i in range(0, len(outpoints36), MAX_GETUTXOS_OUTPOINTS)]
        paths = ["/rest/getutxos/" + "/".join(f"{op[:32][::-1].hex()}-{int.from_bytes(op[32:], 'little')}" for op in ops) + ".bin" for ops in chunks]
        found: list[wire.TxOut | None] = []
        for ops, path, (status, body) in zip(chunks, paths, self._get_many(paths)):
            try:
                found += wire.parse_getutxos(self._ok(path, status, body), len(ops))
            except MalformedDataError as exc:
                raise ServerError(f"REST getutxos: {exc}") from None
        return found


class _Pipelined:
    """One kept-alive HTTP/1.1 connection that pipelines GET requests (stdlib's http.client cannot, and
    its header parsing costs more than a mempool tx's whole lookup).

    Args:
        url: the node's base URL (http or https, no user info).
        timeout: seconds per socket operation.
    """

    def __init__(self, url: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        self.url, self.timeout = url, timeout
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port or (443 if self.https else 80)
        self.netloc, self.prefix = parts.netloc, parts.path
        self.sock: socket.socket | None = None
        self.reader = None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = self.reader = None

    def _connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.https:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        self.sock, self.reader = sock, sock.makefile("rb")

    def get_many(self, paths: Sequence[str]) -> list[tuple[int, bytes]]:
        """(status, body) of each GET, in order. Requests a closed connection left unanswered are sent
        again on a new one (GETs are idempotent), as long as each new connection answers one.

        Raises:
            ServerError: unreachable, closed before any answer, or a reply that is not HTTP.
        """
        replies: list[tuple[int, bytes]] = []
        host = f"Host: {self.netloc}\r\n\r\n"
        while len(replies) < len(paths):
            fresh = self.sock is None
            requests = [f"GET {self.prefix}{p} HTTP/1.1\r\n{host}".encode() for p in paths[len(replies) : len(replies) + PIPELINE]]
            window, size = requests[:1], len(requests[0])
            for request in requests[1:]:
                size += len(request)
                if size > PIPELINE_BYTES:
                    break
                window.append(request)
            try:
                if fresh:
                    self._connect()
                self.sock.sendall(b"".join(window))
                for _ in window:
                    status, body, keep = self._reply()
                    replies.append((status, body))
                    fresh = False
                    if not keep:
                        self.close()
                        break
            except (OSError, EOFError) as exc:
                self.close()
                if fresh:
                    raise ServerError(f"cannot reach the node at {self.url}: {exc or 'connection closed'}") from None
            except ServerError:
                self.close()
                raise
        return replies

    def _reply(self) -> tuple[int, bytes, bool]:
        """(status, body, whether the connection stays open) of the next reply.

        Raises:
            EOFError: the connection closed before a whole reply.
            ServerError: not an HTTP/1.x reply, or one in chunks (Core gives a Content-Length).
        """
        line = self.reader.readline(_MAX_ERROR_TEXT)
        if not line:
            raise EOFError
        version, _, rest = line.partition(b" ")
        status = rest[:3]
        if not version.startswith(b"HTTP/1.") or not status.isdigit():
            raise ServerError(f"REST: not an HTTP reply from {self.url}: {_first_line(line)!r}")
        length, keep = None, version == b"HTTP/1.1"
        for _ in range(_MAX_HEADERS):
            line = self.reader.readline(65536)
            if not line:
                raise EOFError
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length" and value.isdigit():
                length = int(value)
            elif name == b"transfer-encoding" and value != b"identity":
                raise ServerError(f"REST: a reply in transfer encoding {value.decode('ascii', 'replace')!r} from {self.url}")
            elif name == b"connection":
                keep = value == b"keep-alive" or (keep and value != b"close")
        else:
            raise ServerError(f"REST: more than {_MAX_HEADERS} header lines from {self.url}")
        if length is not None:
            body = self.reader.read(length)
            if len(body) != length:
                raise EOFError
        else:  # the body ends with the connection
            body, keep = self.reader.read(), False
        return int(status), body, keep


class RpcNode:
    """Core's JSON-RPC interface, with cookie or user:password authentication.

    Args:
        url: e.g. http://127.0.0.1:8332 (user:password@ in it is used as auth).
        cookie_file: path of Core's `.cookie`, read on each request. Core writes it when it starts and
            deletes it when it stops: a file that cannot be read is a ServerConfigError until it has been
            read once, then a ServerError (the node restarting), retried like a network fault.
        user, password: rpcuser / rpcpassword.
        timeout: seconds per request.

    Raises:
        ServerError: the URL is not http(s).
    """

    def __init__(
        self,
        url: str,
        cookie_file: str | None = None,
        user: str | None = None,
        password: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.url, url_auth = _split_url(url)
        self.cookie_file = cookie_file
        self._auth = (user, password or "") if user is not None else url_auth
        self.timeout = timeout
        self._last_id = 0
        self._cookie_read = False

    def __repr__(self) -> str:
        return f"RpcNode({self.url!r})"

    def _authorization(self) -> str | None:
        """The Authorization header's value, or None without credentials.

        Raises:
            ServerConfigError: the cookie file cannot be read, or is not user:password, and never was.
            ServerError: so, after it was read once (the node restarting).
        """
        if self.cookie_file is not None:
            error = ServerError if self._cookie_read else ServerConfigError
            try:
                cookie = Path(self.cookie_file).read_text().strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not text"
                raise error(f"cannot read the RPC cookie file {self.cookie_file}: {reason}") from None
            if ":" not in cookie:
                raise error(f"the RPC cookie file {self.cookie_file} is not user:password")
            self._cookie_read = True
            credentials = cookie
        elif self._auth is not None:
            credentials = f"{self._auth[0]}:{self._auth[1]}"
        else:
            return None
        return "Basic " + base64.b64encode(credentials.encode()).decode()

    def call(self, method: str, *params: object) -> object:
        """Call a JSON-RPC method and return its result (floats as Decimal).

        Raises:
            ServerError: unreachable, HTTP error, bad credentials, or an RPC error reply.
        """
        self._last_id += 1
        body = json.dumps({"jsonrpc": "1.0", "id": self._last_id, "method": method, "params": list(params)}).encode()
        reply_obj = self._post(body, method)
        if not isinstance(reply_obj, dict) or "result" not in reply_obj:
            raise ServerError(f"RPC {method}: not a JSON-RPC reply")
        error = reply_obj.get("error")
        if error:
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ServerError(f"RPC {method}: {message}{_PRUNED_HINT if 'pruned' in str(message) else ''}")
        return reply_obj["result"]

    def _post(self, body: bytes, method: str) -> object:
        """POST a JSON-RPC request (or batch) and return the parsed reply.

        Raises:
            ServerError: unreachable, bad credentials, an HTTP error without a JSON body, or not JSON.
        """
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        auth = self._authorization()
        if auth:
            request.add_header("Authorization", auth)
        try:
            with _OPENER.open(request, timeout=self.timeout) as reply:
                data = reply.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise ServerError("RPC authentication failed (check --rpc-cookie or --rpc-user)") from None
            data = exc.read()  # Core answers RPC errors with HTTP 404/500 and a JSON body
            if not data.lstrip().startswith(b"{"):
                raise ServerError(f"RPC {method}: HTTP {exc.code} {_first_line(data)}".rstrip()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(f"cannot reach the node at {self.url}: {reason}") from None
        try:
            return formats.load_json(data, f"RPC {method} reply")
        except MalformedDataError as exc:
            raise ServerError(str(exc)) from None

    def batch(self, method: str, params: Sequence[Sequence[object]]) -> list[tuple[object, dict | None]]:
        """Call `method` once per params in JSON-RPC batch requests of RPC_BATCH calls.

        Returns:
            (result, error) per call, in order; error is Core's {"code", "message"} or None.

        Raises:
            ServerError: unreachable, HTTP error, bad credentials, or a reply that is not a batch reply.
        """
        out: list[tuple[object, dict | None]] = []
        for lo in range(0, len(params), RPC_BATCH):
            calls = [{"jsonrpc": "1.0", "id": lo + i, "method": method, "params": list(p)} for i, p in enumerate(params[lo : lo + RPC_BATCH])]
            reply = self._post(json.dumps(calls).encode(), method)
            by_id = {r.get("id"): r for r in reply if isinstance(r, dict)} if isinstance(reply, list) else {}
            if len(by_id) != len(calls) or any(c["id"] not in by_id for c in calls):
                raise ServerError(f"RPC {method}: not a JSON-RPC batch reply")
            for c in calls:
                error = by_id[c["id"]].get("error")
                out.append((by_id[c["id"]].get("result"), error if isinstance(error, dict) else ({"message": str(error)} if error else None)))
        return out

    def mempool_txids(self) -> list[bytes]:
        """The txids32 (internal order) in the node's mempool (`getrawmempool`).

        Raises:
            ServerError: as `call`, or a reply that is not a list of txids.
        """
        return _txids(self.call("getrawmempool"), "RPC getrawmempool")

    def transactions(self, txids32: Sequence[bytes]) -> dict[bytes, bytes]:
        """The raw txs the node has of `txids32` (`getrawtransaction txid`, batched: mempool txs, and
        confirmed ones with -txindex); a txid it does not have (error -5) is left out, and a result
        that is not hex is given as b"" (like any bytes that are not the tx, the caller skips it).

        Raises:
            ServerError: as `call`, or another error.
        """
        found = {}
        for txid32, (result, error) in zip(txids32, self.batch("getrawtransaction", [(t[::-1].hex(),) for t in txids32])):
            if error is not None:
                if error.get("code") == -5:
                    continue
                raise ServerError(f"RPC getrawtransaction: {error.get('message', error)}")
            try:
                found[txid32] = formats.from_hex(result if isinstance(result, str) else "", "getrawtransaction result")
            except MalformedDataError:
                found[txid32] = b""
        return found

    def utxos(self, outpoints36: Sequence[bytes]) -> list[wire.TxOut | None]:
        """Each outpoint's output in the UTXO set of the node's tip, or None (`gettxout txid n false`,
        batched: outputs that mempool txs spend are still given).

        Raises:
            ServerError: as `call`, an error, or a result of the wrong shape.
        """
        params = [(op[:32][::-1].hex(), int.from_bytes(op[32:], "little"), False) for op in outpoints36]
        found: list[wire.TxOut | None] = []
        for result, error in self.batch("gettxout", params):
            if error is not None:
                raise ServerError(f"RPC gettxout: {error.get('message', error)}")
            try:
                found.append(None if result is None else formats.json_txout(result, "gettxout result"))
            except MalformedDataError as exc:
                raise ServerError(str(exc)) from None
        return found

    def chain(self) -> str:
        """Core's name of the node's chain (`getblockchaininfo`)."""
        info = self.call("getblockchaininfo")
        chain = info.get("chain") if isinstance(info, dict) else None
        if not isinstance(chain, str):
            raise ServerError("RPC getblockchaininfo: no `chain` string")
        return chain

    def tip_height(self) -> int:
        """The height of the node's best block (`getblockcount`)."""
        height = self.call("getblockcount")
        if not isinstance(height, int) or isinstance(height, bool):
            raise ServerError("RPC getblockcount: not an integer")
        return _tip_height(height, "RPC getblockcount")

    def block_hash(self, height: int) -> str:
        """The display-hex hash of the block at `height` (`getblockhash`)."""
        result = self.call("getblockhash", height)
        return _hash_hex(result if isinstance(result, str) else "", "getblockhash result")

    def block(self, hash_hex: str) -> tuple[bytes, bytes]:
        """(raw block from `getblock <hash> 0`, spent outputs from `getblock <hash> 3`).

        Raises:
            ServerError: as `call`, or a reply of the wrong shape.
            PrevoutsError: the node's getblock 3 has no prevouts (Core before 25).
        """
        hash_hex = _hash_hex(hash_hex, "block hash")
        raw = self.call("getblock", hash_hex, 0)
        if not isinstance(raw, str):
            raise ServerError("RPC getblock 0: not a hex string")
        try:
            return formats.from_hex(raw, "getblock 0 result"), formats.spent_from_getblock(self.call("getblock", hash_hex, 3))
        except MalformedDataError as exc:
            raise ServerError(f"RPC getblock: {exc}") from None
