"""The BlindBit Oracle v1 application: routes to answers, built once and served from the cache.

`BlindBitV1` is an `http.Handler`. A request whose answer is cached is answered on the event
loop without a thread hop; a miss is built on a reader thread (one build however many ask),
cached when it may be, and sent. `POST /forward-tx` relays a raw transaction to the node with
`sendrawtransaction` when the server has an RPC node.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import urllib.parse
from collections.abc import Callable, Hashable

from sp_scan.errors import HeightError, IndexStoreError, ServerError

from ..proto import blindbit_v1
from . import routes
from .answers import Answer, AnswerCache, ChainView, Readers, answer, node_call
from .http import JSON_HEADERS, BadRequest, Request, Response, head_bytes, json_error

log = logging.getLogger("sp_scan.server")

PLAIN = JSON_HEADERS + b"Vary: Accept-Encoding\r\n"
GZIPPED = PLAIN + b"Content-Encoding: gzip\r\n"
GET, POST = ("GET", "HEAD", "OPTIONS"), ("POST", "OPTIONS")
ROUTES = {route: GET if method == "GET" else POST for route, method in blindbit_v1.ROUTES.items()}
"""(first path segment, segments after it) -> the methods the route answers (blindbit_v1.ROUTES, with HEAD and OPTIONS)."""
MAX_TX_HEX = 800_000
_HEX = re.compile(r"[0-9a-fA-F]+")


@functools.lru_cache(maxsize=256)
def accepts_gzip(accept_encoding: str) -> bool:
    """True when an Accept-Encoding header value allows gzip (a `gzip` or `*` coding, q > 0)."""
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() in ("gzip", "*"):
            q = params.strip()
            return not (q.startswith("q=") and _qvalue(q[2:]) == 0)
    return False


def _qvalue(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 1.0


def send(built: Answer, gzip: bool) -> Response:
    """The HTTP response for a built answer, gzip when the client takes it and the answer has that form.

    A cacheable answer keeps each form as a whole keep-alive response (`Answer.wires`), so a hit
    is one write of ready bytes.
    """
    gzipped = gzip and built.gzip is not None
    body, headers = (built.gzip, GZIPPED) if gzipped else (built.plain, PLAIN)
    response = Response(built.status, body, headers)
    if built.cacheable:
        wire = built.wires.get(gzipped)
        if wire is None:
            wire = built.wires[gzipped] = head_bytes(response, True) + body
        response.wire = wire
    return response


def options(methods: tuple[str, ...]) -> Response:
    allow = ", ".join(methods).encode()
    headers = b"Allow: %s\r\nAccess-Control-Allow-Origin: *\r\nAccess-Control-Allow-Methods: %s\r\n" % (allow, allow)
    return Response(204, b"", headers + b"Access-Control-Allow-Headers: Content-Type\r\nAccess-Control-Max-Age: 86400\r\n")


def not_allowed(methods: tuple[str, ...]) -> Response:
    return json_error(405, "method not allowed", b"Allow: %s\r\n" % ", ".join(methods).encode())


class BlindBitV1:
    """The v1 routes over the index seen through `view`, answers built by `readers` into `cache`.

    Args:
        view: the chain as served (refreshed before each request).
        readers: threads that read the index.
        cache: built answers.
        relay: a node client with `call(method, *params)` (an `RpcNode`) for /forward-tx, or None.
    """

    def __init__(self, view: ChainView, readers: Readers, cache: AnswerCache, relay=None) -> None:
        self.view, self.readers, self.cache, self.relay = view, readers, cache, relay

    def __call__(self, request: Request) -> Response | asyncio.Future:
        parts = request.path[1:].split("/")
        route = (parts[0], len(parts) - 1)
        methods = ROUTES.get(route)
        if methods is None:
            return json_error(404, "not found")
        if request.method not in methods:
            return options(methods) if request.method == "OPTIONS" else not_allowed(methods)
        if request.method == "OPTIONS":
            return options(methods)
        if route[0] == "forward-tx":
            return asyncio.ensure_future(self.forward_tx(request))
        gzip = accepts_gzip(request.headers.get("accept-encoding", ""))
        try:
            self.view.refresh()
            key, build = self._route(route[0], parts[1:], request)
        except routes.RouteError as exc:
            return json_error(exc.status, str(exc))
        except IndexStoreError as exc:
            log.error("index read failed: %s", exc)
            return json_error(503, f"the index cannot be read: {exc}")
        built = self.cache.get(key)
        if built is not None:
            return send(built, gzip)
        if not isinstance(build, tuple):  # built on the loop: small answers from the view
            self.cache.put(key, build)
            return send(build, gzip)
        return asyncio.ensure_future(self._built(key, build, gzip))

    # ---- routing ----

    def _route(self, name: str, args: list[str], request: Request) -> tuple[Hashable, Answer | tuple]:
        """(cache key, the answer or (function, args) that builds it on a reader thread)."""
        view = self.view
        tip = view.tip
        if name in ("info", "block-height"):
            if tip is None:
                raise routes.RouteError(503, "the index has no blocks yet")
            body = routes.info_body(view.network, tip[0]) if name == "info" else routes.block_height_body(tip[0])
            return (name, None, tip[1]), answer(200, body)
        height = routes.parse_height(args[-1])
        hash32 = view.hash_at(height)
        if name == "filter" and args[0] not in blindbit_v1.FILTER_KINDS:
            raise routes.RouteError(404, f"unknown filter type {args[0][:40]!r} (new-utxos or spent)")
        if hash32 is None:
            raise routes.RouteError(404, f"height {height} is not in the index ({view.range_text()})")
        if name == "block-hash":
            return (name, height, hash32, None), answer(200, routes.block_hash_body(hash32))
        if name in ("tweak-index", "tweaks"):
            dust = routes.parse_dust_limit(_query(request, "dustLimit"))
            cut = name == "tweaks"
            tip_hash = tip[1] if cut else None
            return ("tweaks", height, hash32, dust, cut, tip_hash), (routes.tweaks_answer, height, hash32, tip_hash, dust, cut)
        if name == "filter":
            return ("filter", height, hash32, args[0], None), (routes.filter_answer, height, hash32, args[0])
        if name == "utxos":
            return ("utxos", height, hash32, tip[1]), (routes.utxos_answer, height, hash32, tip[1])
        return ("spent-index", height, hash32, None), (routes.spent_index_answer, height, hash32)

    async def _built(self, key: Hashable, build: tuple, gzip: bool) -> Response:
        return send(await self.cache.build(key, lambda: self.readers.run(_guarded, *build)), gzip)

    # ---- POST /forward-tx ----

    async def forward_tx(self, request: Request) -> Response:
        """Relay `{"data": "<raw tx hex>"}` (or the form `data=<hex>`) with sendrawtransaction; answer the txid."""
        if self.relay is None:
            return json_error(503, "this server relays no transactions (it has no RPC node): broadcast through your own node")
        tx_hex = _tx_hex(request)
        try:
            txid = await node_call(self.relay.call, "sendrawtransaction", tx_hex)
        except ServerError as exc:
            return json_error(502, f"the node did not relay the transaction: {exc}")
        return Response(200, json.dumps(txid).encode(), JSON_HEADERS)


def _query(request: Request, name: str) -> str | None:
    try:
        return request.query_value(name)
    except BadRequest as exc:
        raise routes.RouteError(exc.status, str(exc)) from None


def _tx_hex(request: Request) -> str:
    """The raw transaction hex of a /forward-tx body: JSON `{"data": hex}` or a form `data=hex`.

    Raises:
        BadRequest: 400 when there is none, or it is not hex of whole bytes.
    """
    body = request.body
    data = None
    if body.lstrip().startswith(b"{"):
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            raise BadRequest(400, "the body is not JSON") from None
        data = value.get("data") if isinstance(value, dict) else None
    else:
        try:
            data = urllib.parse.parse_qs(body.decode("ascii"), max_num_fields=4).get("data", [None])[0]
        except (UnicodeDecodeError, ValueError):
            raise BadRequest(400, "the body is neither JSON nor a form") from None
    if not isinstance(data, str) or not data:
        raise BadRequest(400, 'the body must be {"data": "<raw transaction hex>"}')
    if len(data) % 2 or len(data) > MAX_TX_HEX or not _HEX.fullmatch(data):
        raise BadRequest(400, "data is not the hex of a raw transaction")
    return data.lower()


def _guarded(index, fn: Callable, *args) -> Answer:
    """fn(index, *args), with the index's refusals turned into error answers that are not cached."""
    try:
        return fn(index, *args)
    except routes.RouteError as exc:
        return answer(exc.status, routes.dumps({"error": str(exc)}), cacheable=False)
    except HeightError as exc:
        return answer(404, routes.dumps({"error": str(exc)}), cacheable=False)
    except IndexStoreError as exc:
        log.error("index read failed: %s", exc)
        return answer(503, routes.dumps({"error": f"the index cannot be read: {exc}"}), cacheable=False)
