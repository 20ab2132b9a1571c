"""Fetch blocks and their spent outputs from a Bitcoin Core node (REST or JSON-RPC).

Both clients give the same four calls: `chain()` (Core's chain name),
`tip_height()`, `block_hash(height)` (display hex) and `block(hash_hex)` ->
(block_bytes, spent_bytes), the spent outputs in Core's REST binary form as
`sp_scan.wire` parses.
Only the standard library is used. Every failure raises `NodeError`;
credentials never appear in messages.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from . import formats
from .errors import MalformedDataError, NodeError

DEFAULT_TIMEOUT = 120.0
_MAX_ERROR_TEXT = 200
_REST_HINT = " (is the node started with -rest? spenttxouts needs Core 30+)"
_PRUNED_HINT = " (the node has pruned this block: scan it from an unpruned node, or keep more blocks with a larger -prune)"
# Nodes are reached directly: proxy settings from the environment are not applied.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _split_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """Return (url without user info, (user, password) from it or None)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NodeError("a node URL must look like http://host:port")
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
        raise NodeError(str(exc)) from None
    if len(raw) != 32:
        raise NodeError(f"{what}: expected a 32-byte block hash")
    return raw.hex()


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip().splitlines()
    return text[0][:_MAX_ERROR_TEXT] if text else ""


class RestNode:
    """Core's REST interface (`-rest`), unauthenticated.

    Args:
        url: the node's base URL, e.g. http://127.0.0.1:8332.
        timeout: seconds per request.

    Raises:
        NodeError: the URL is not http(s).
    """

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url, _ = _split_url(url)
        self.timeout = timeout

    def get(self, path: str) -> bytes:
        """GET url + path; raise NodeError unless the node answers 200."""
        target = self.url + path
        try:
            with _OPENER.open(target, timeout=self.timeout) as reply:
                return reply.read()
        except urllib.error.HTTPError as exc:
            detail = _first_line(exc.read())
            hint = (_PRUNED_HINT if "pruned" in detail else _REST_HINT) if exc.code == 404 else ""
            raise NodeError(f"REST {path}: HTTP {exc.code} {detail}{hint}".rstrip()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise NodeError(f"cannot reach the node at {self.url}: {reason}") from None

    def _chaininfo(self, field: str, kind: type) -> object:
        try:
            value = json.loads(self.get("/rest/chaininfo.json"))[field]
        except (ValueError, KeyError, TypeError):
            raise NodeError("REST /rest/chaininfo.json: unexpected reply") from None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise NodeError(f"REST /rest/chaininfo.json: `{field}` is not {'an integer' if kind is int else 'a string'}")
        return value

    def chain(self) -> str:
        """Core's name of the node's chain: main, test, testnet4, signet or regtest (`/rest/chaininfo.json`)."""
        return self._chaininfo("chain", str)

    def tip_height(self) -> int:
        """The height of the node's best block (`/rest/chaininfo.json`)."""
        return self._chaininfo("blocks", int)

    def block_hash(self, height: int) -> str:
        """The display-hex hash of the active chain's block at `height`."""
        return _hash_hex(self.get(f"/rest/blockhashbyheight/{height}.hex").decode("ascii", "replace"), "block hash")

    def block(self, hash_hex: str) -> tuple[bytes, bytes]:
        """(raw block, spent outputs) from `/rest/block/<hash>.bin` and `/rest/spenttxouts/<hash>.bin`."""
        hash_hex = _hash_hex(hash_hex, "block hash")
        return self.get(f"/rest/block/{hash_hex}.bin"), self.get(f"/rest/spenttxouts/{hash_hex}.bin")


class RpcNode:
    """Core's JSON-RPC interface, with cookie or user:password authentication.

    Args:
        url: e.g. http://127.0.0.1:8332 (user:password@ in it is used as auth).
        cookie_file: path of Core's `.cookie`, read on each request.
        user, password: rpcuser / rpcpassword.
        timeout: seconds per request.

    Raises:
        NodeError: the URL is not http(s).
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

    def __repr__(self) -> str:
        return f"RpcNode({self.url!r})"

    def _authorization(self) -> str | None:
        if self.cookie_file is not None:
            try:
                cookie = Path(self.cookie_file).read_text().strip()
            except OSError as exc:
                raise NodeError(f"cannot read the RPC cookie file: {exc.strerror}") from None
            if ":" not in cookie:
                raise NodeError("the RPC cookie file is not user:password")
            credentials = cookie
        elif self._auth is not None:
            credentials = f"{self._auth[0]}:{self._auth[1]}"
        else:
            return None
        return "Basic " + base64.b64encode(credentials.encode()).decode()

    def call(self, method: str, *params: object) -> object:
        """Call a JSON-RPC method and return its result (floats as Decimal).

        Raises:
            NodeError: unreachable, HTTP error, bad credentials, or an RPC error reply.
        """
        self._last_id += 1
        body = json.dumps({"jsonrpc": "1.0", "id": self._last_id, "method": method, "params": list(params)}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        auth = self._authorization()
        if auth:
            request.add_header("Authorization", auth)
        try:
            with _OPENER.open(request, timeout=self.timeout) as reply:
                data = reply.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise NodeError("RPC authentication failed (check --rpc-cookie or --rpc-user)") from None
            data = exc.read()  # Core answers RPC errors with HTTP 404/500 and a JSON body
            if not data.lstrip().startswith(b"{"):
                raise NodeError(f"RPC {method}: HTTP {exc.code} {_first_line(data)}".rstrip()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise NodeError(f"cannot reach the node at {self.url}: {reason}") from None
        try:
            reply_obj = formats.load_json(data, f"RPC {method} reply")
        except MalformedDataError as exc:
            raise NodeError(str(exc)) from None
        if not isinstance(reply_obj, dict) or "result" not in reply_obj:
            raise NodeError(f"RPC {method}: not a JSON-RPC reply")
        error = reply_obj.get("error")
        if error:
            message = error.get("message", error) if isinstance(error, dict) else error
            raise NodeError(f"RPC {method}: {message}{_PRUNED_HINT if 'pruned' in str(message) else ''}")
        return reply_obj["result"]

    def chain(self) -> str:
        """Core's name of the node's chain (`getblockchaininfo`)."""
        info = self.call("getblockchaininfo")
        chain = info.get("chain") if isinstance(info, dict) else None
        if not isinstance(chain, str):
            raise NodeError("RPC getblockchaininfo: no `chain` string")
        return chain

    def tip_height(self) -> int:
        """The height of the node's best block (`getblockcount`)."""
        height = self.call("getblockcount")
        if not isinstance(height, int):
            raise NodeError("RPC getblockcount: not an integer")
        return height

    def block_hash(self, height: int) -> str:
        """The display-hex hash of the block at `height` (`getblockhash`)."""
        result = self.call("getblockhash", height)
        return _hash_hex(result if isinstance(result, str) else "", "getblockhash result")

    def block(self, hash_hex: str) -> tuple[bytes, bytes]:
        """(raw block from `getblock <hash> 0`, spent outputs from `getblock <hash> 3`).

        Raises:
            NodeError: as `call`, or a reply of the wrong shape.
            PrevoutsError: the node's getblock 3 has no prevouts (Core before 25).
        """
        hash_hex = _hash_hex(hash_hex, "block hash")
        raw = self.call("getblock", hash_hex, 0)
        if not isinstance(raw, str):
            raise NodeError("RPC getblock 0: not a hex string")
        try:
            return formats.from_hex(raw, "getblock 0 result"), formats.spent_from_getblock(self.call("getblock", hash_hex, 3))
        except MalformedDataError as exc:
            raise NodeError(f"RPC getblock: {exc}") from None
