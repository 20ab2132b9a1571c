"""Test support for the CLI: importing it from the source tree, and local Core-like HTTP servers."""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
import urllib.parse
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

import pytest

import blockfactory as bf
from bitcoin.core import CTransaction
from bitcoin.core.serialize import SerializationError
from node_mempool import GARBAGE, MEMPOOL_HEIGHT
from sp_scan.extract import ScriptType, script_type
from sp_scan.wire import compact_size, parse_spent

ROOT = Path(__file__).resolve().parent.parent
MAX_GETUTXOS_OUTPOINTS = 15  # rest.cpp's limit



# --- Core-like servers (127.0.0.1 only, one thread per request, stopped by the fixture) ---


class ChainView(Protocol):
    """What the servers read: the active chain by height and any stored block by hash (32 bytes, internal order)."""

    def best(self) -> tuple[int, bytes]:
        """(height, hash32) of the tip."""

    def hash_at(self, height: int) -> bytes | None:
        """The active chain's hash at `height`, None when there is none."""

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        """(height, raw block, spent outputs in REST .bin form or None if unavailable), None if unknown."""


class Chain:
    """A short chain of test blocks by height, each built from a slice of the vectors' receiving cases.

    `blocks` gives the chain's blocks instead (heights from 0, each linking to the one before).
    """

    def __init__(self, length: int = 6, per_block: int = 5, blocks: list[bf.TestBlock] | None = None) -> None:
        if blocks is None:
            cases = bf.receiving_cases()
            blocks, prev = [], b"\x00" * 32
            for h in range(length):
                chosen = [cases[(h * per_block + i) % len(cases)] for i in range(per_block)]
                blocks.append(bf.build(chosen, height=h, prev=prev))
                prev = blocks[-1].header.GetHash()
        self.blocks = blocks
        self.by_hash = {tb.header.GetHash(): (h, tb) for h, tb in enumerate(self.blocks)}

    @property
    def tip(self) -> int:
        return len(self.blocks) - 1

    def best(self) -> tuple[int, bytes]:
        return self.tip, self.blocks[-1].header.GetHash()

    def hash_at(self, height: int) -> bytes | None:
        return self.blocks[height].header.GetHash() if 0 <= height <= self.tip else None

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        if hash32 not in self.by_hash:
            return None
        height, tb = self.by_hash[hash32]
        return height, tb.raw, tb.spent_bytes

    def expected_tweaks(self, start: int, stop: int) -> list[dict]:
        """What the vectors say `tweaks` prints for heights start..stop."""
        out = []
        for tb in self.blocks[start : stop + 1]:
            for tx, case in zip(tb.txs[1:], tb.cases):
                if case["expected"]["tweak"]:
                    out.append({"txid": tx.GetTxid()[::-1].hex(), "tweak": case["expected"]["tweak"]})
        return out


class Misreported:
    """`chain` whose node reports its tip at another height than it holds (a broken node or proxy: `"blocks": -5`)."""

    def __init__(self, chain: ChainView, height: int) -> None:
        self.chain, self.height = chain, height

    def best(self) -> tuple[int, bytes]:
        return self.height, self.chain.best()[1]

    def hash_at(self, height: int) -> bytes | None:
        return self.chain.hash_at(height)

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        return self.chain.lookup(hash32)


class StaleHeights:
    """`chain` behind a cache that answers the block hash at some heights from another branch (a stale proxy)."""

    def __init__(self, chain: ChainView, stale: ChainView, heights: set[int]) -> None:
        self.chain, self.stale, self.heights = chain, stale, heights

    def best(self) -> tuple[int, bytes]:
        return self.chain.best()

    def hash_at(self, height: int) -> bytes | None:
        return (self.stale if height in self.heights else self.chain).hash_at(height)

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        return self.chain.lookup(hash32) or self.stale.lookup(hash32)


def spending_chain(length: int, fork: Chain | None = None, fork_height: int = 0, salt: int = 0) -> Chain:
    """A chain of blocks paying the vectors' first wallet, where every third block spends earlier taproot outputs.

    A spending block spends all taproot outputs of one earlier tx (cut through; which one depends on
    `salt`) and the largest taproot output of another, one with more taproot outputs when there is one
    (not cut through). With `fork`, the chain is fork's blocks below `fork_height`, then new blocks (different
    for another `salt`) up to `length` - 1.
    """
    cases = bf.wallet_cases()
    blocks = list(fork.blocks[:fork_height]) if fork else []
    for h in range(len(blocks), length):
        prev = blocks[-1].header.GetHash() if blocks else b"\x00" * 32
        nonce = h + (salt << 16)
        if h % 3 == 2:
            outputs = [o for tb in blocks[max(h - 3, 0) : h] for o in bf.taproot_outputs(tb)]
            txids = list(dict.fromkeys(o[0] for o in outputs))
            cut = txids[salt % len(txids)]
            whole = [o for o in outputs if o[0] == cut]
            many = [t for t in txids if t != cut and sum(o[0] == t for o in outputs) > 1]
            partly = (many or [t for t in txids if t != cut])[0]
            other = max((o for o in outputs if o[0] == partly), key=lambda o: o[2].amount)
            txs = [bf.spend_tx(h, whole), bf.spend_tx(h + 1, [other])]
            blocks.append(bf.assemble([t for t, _ in txs], [p for _, p in txs], h, prev, nonce))
        else:
            chosen = [cases[(3 * h + i + salt) % len(cases)] for i in range(3)]
            blocks.append(bf.build(chosen, height=h, prev=prev, nonce=nonce))
    return Chain(blocks=blocks)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that hangs up (Ctrl-C tests) is not a server failure


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a reply larger than the buffer goes out in several writes: without this a kept-alive client waits 40 ms for it
    wbufsize = 1 << 16  # headers and body in one write (handle_one_request flushes after each request)
    server: _Server

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def gate(self, height: int) -> None:
        """Hold a request for a block hash at `height` or above while the server holds them (see NodeServer.hold)."""
        server = self.server
        if server.hold_from is not None and height >= server.hold_from:
            server.held.set()
            server.released.wait()

    def answering(self) -> bool:
        """False once the server was told to stop answering: the connection is then closed unanswered."""
        with self.server.lock:
            budget = self.server.budget
            if budget is not None:
                self.server.budget = budget - 1
        if budget is not None and budget <= 0:
            self.close_connection = True
            return False
        return True


def _hash32(param: str) -> bytes | None:
    """The internal-order hash of a 64-digit display hex string, or None."""
    if len(param) != 64:
        return None
    try:
        return bytes.fromhex(param)[::-1]
    except ValueError:
        return None


class RestHandler(_Base):
    """Serves /rest/ paths as Core's rest.cpp does (bodies, content types, error texts)."""

    def error(self, status: int, message: str) -> None:
        self.reply(status, (message + "\r\n").encode(), "text/plain")

    def do_GET(self) -> None:  # noqa: N802
        if not self.answering():
            return
        chain: ChainView = self.server.chain
        self.server.requests.append(self.path)
        if self.server.delay:
            time.sleep(self.server.delay)
        path = self.path.split("?", 1)[0]
        if path == "/rest/chaininfo.json":
            height, hash32 = chain.best()
            info = {"chain": "regtest", "blocks": height, "headers": height, "bestblockhash": hash32[::-1].hex()}
            return self.reply(200, (json.dumps(info) + "\n").encode(), "application/json")
        for prefix in ("/rest/blockhashbyheight/", "/rest/block/", "/rest/spenttxouts/", "/rest/tx/", "/rest/getutxos", "/rest/mempool/"):
            if path.startswith(prefix):
                param, _, fmt = path[len(prefix) :].rpartition(".")
                if prefix == "/rest/mempool/":
                    return self.mempool(param, fmt)
                if fmt not in ("bin", "hex", "json"):
                    return self.error(404, "output format not found (available: .bin, .hex, .json)")
                return getattr(self, prefix.split("/")[2])(chain, param, fmt)
        self.error(404, "not found")

    # --- the mempool's routes (rest.cpp: rest_mempool, rest_tx, rest_getutxos) ---

    def _mempool(self):
        mempool = self.server.mempool
        if mempool is None:
            self.error(404, "Mempool disabled or instance not found")
        return mempool

    def _json(self, obj: object) -> None:
        self.reply(200, (bf.dumps(obj) + "\n").encode(), "application/json")

    def mempool(self, param: str, fmt: str) -> None:
        if param not in ("contents", "info") or fmt not in ("json", "bin", "hex"):
            return self.error(400, "Invalid URI format. Expected /rest/mempool/<info|contents>.json")
        mempool = self._mempool()
        if mempool is None:
            return
        if fmt != "json":
            return self.error(404, "output format not found (available: json)")
        if param == "info":
            return self._json(_decimals(mempool.info()))
        query = urllib.parse.parse_qs(self.path.partition("?")[2])
        verbose, sequence = (query.get(k, [d])[0] for k, d in (("verbose", "true"), ("mempool_sequence", "false")))
        if verbose not in ("true", "false"):
            return self.error(400, 'The "verbose" query parameter must be either "true" or "false".')
        if sequence not in ("true", "false"):
            return self.error(400, 'The "mempool_sequence" query parameter must be either "true" or "false".')
        if verbose == "true" and sequence == "true":
            return self.error(400, 'Verbose results cannot contain mempool sequence values. (hint: set "verbose=false")')
        if verbose == "true":
            return self._json(_decimals(mempool.verbose()))
        with mempool.lock:
            txids = [t[::-1].hex() for t in mempool.txids()]
            self._json({"txids": txids, "mempool_sequence": mempool.sequence} if sequence == "true" else txids)

    def tx(self, chain: ChainView, param: str, fmt: str) -> None:
        if _hash32(param) is None:
            return self.error(400, f"Invalid hash: {param}")
        mempool = self.server.mempool
        raw = mempool.raw(_hash32(param)) if mempool is not None else None  # no -txindex: mempool txs only
        if raw is None:
            return self.error(404, f"{param} not found")
        if fmt == "json":
            return self.error(404, "json not served by this test server")
        self._data(raw, fmt)

    def getutxos(self, chain: ChainView, param: str, fmt: str) -> None:
        parts = param[1:].split("/") if len(param) > 1 else []
        if not parts:
            return self.error(400, "Error: empty request")
        check = parts[0] == "checkmempool"
        outpoints = []
        for part in parts[1 if check else 0 :]:
            txid, _, n = part.partition("-")
            if _hash32(txid) is None or not n.isdigit() or int(n) >= 2**31:
                return self.error(400, "Parse error")
            outpoints.append(_hash32(txid) + int(n).to_bytes(4, "little"))
        if not outpoints:
            return self.error(400, "Error: empty request")
        if len(outpoints) > MAX_GETUTXOS_OUTPOINTS:
            return self.error(400, f"Error: max outpoints exceeded (max: {MAX_GETUTXOS_OUTPOINTS}, tried: {len(outpoints)})")
        mempool = self._mempool()
        if mempool is None:
            return
        with mempool.lock:
            height, tip = chain.best()
            coins = mempool.coins(outpoints, check)
        bitmap = bytearray((len(coins) + 7) // 8)
        for i, coin in enumerate(coins):
            bitmap[i >> 3] |= (coin is not None) << (i & 7)
        found = [c for c in coins if c is not None]
        if fmt == "json":
            utxos = [{"height": h, "value": bf.btc(o.amount), "scriptPubKey": _script_json(o.script)} for h, o, _ in found]
            bits = "".join("1" if c is not None else "0" for c in coins)
            return self._json({"chainHeight": height, "chaintipHash": tip[::-1].hex(), "bitmap": bits, "utxos": utxos})
        body = struct.pack("<i", height) + tip + compact_size(len(bitmap)) + bytes(bitmap) + compact_size(len(found))
        body += b"".join(struct.pack("<II", 0, h) + o.to_bytes() for h, o, _ in found)
        self._data(body, fmt)

    def blockhashbyheight(self, chain: ChainView, param: str, fmt: str) -> None:
        if not param.isdigit():
            return self.error(400, f"Invalid height: {param}")
        self.gate(int(param))
        hash32 = chain.hash_at(int(param))
        if hash32 is None:
            return self.error(404, "Block height out of range")
        if fmt == "bin":
            return self.reply(200, hash32, "application/octet-stream")
        if fmt == "hex":
            return self.reply(200, (hash32[::-1].hex() + "\n").encode(), "text/plain")
        self.reply(200, (json.dumps({"blockhash": hash32[::-1].hex()}) + "\n").encode(), "application/json")

    def _lookup(self, chain: ChainView, param: str):
        hash32 = _hash32(param)
        if hash32 is None:
            return self.error(400, f"Invalid hash: {param}")
        found = chain.lookup(hash32)
        if found is None:
            self.error(404, f"{param} not found")
        elif found[0] < self.server.pruned_below:
            self.error(404, f"{param} not available (pruned data)")  # Core's rest.cpp
            return None
        return found

    def block(self, chain: ChainView, param: str, fmt: str) -> None:
        found = self._lookup(chain, param)
        if found is None:
            return
        if fmt == "json":
            return self.error(404, "json not served by this test server")
        self._data(found[1], fmt)

    def spenttxouts(self, chain: ChainView, param: str, fmt: str) -> None:
        found = self._lookup(chain, param)
        if found is None:
            return
        if found[2] is None:
            return self.error(404, f"{param} undo not available")
        if fmt == "json":
            return self.reply(200, bf.spenttxouts_json(parse_spent(found[2])).encode(), "application/json")
        self._data(found[2], fmt)

    def _data(self, data: bytes, fmt: str) -> None:
        if fmt == "bin":
            self.reply(200, data, "application/octet-stream")
        else:
            self.reply(200, (data.hex() + "\n").encode(), "text/plain")


class RpcHandler(_Base):
    """A JSON-RPC 1.0 endpoint with Basic auth, answering as Core does for the calls sp-scan makes."""

    def do_POST(self) -> None:  # noqa: N802
        chain: ChainView = self.server.chain
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.answering():
            return
        expected = "Basic " + base64.b64encode(self.server.credentials.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.server.requests.append("401")
            return self.reply(401, b"", "text/html")
        if self.server.delay:
            time.sleep(self.server.delay)
        request = json.loads(body)
        if isinstance(request, list):  # a batch: one reply per call, HTTP 200 (Core's JSONRPCExecBatch)
            replies = [self._one(chain, r)[1] for r in request]
            return self.reply(200, (bf.dumps(replies) + "\n").encode(), "application/json")
        status, reply = self._one(chain, request)
        self.reply(status, (bf.dumps(reply) + "\n").encode(), "application/json")

    def _one(self, chain: ChainView, request: dict) -> tuple[int, dict]:
        self.server.requests.append(request["method"])
        try:
            result = self.dispatch(chain, request["method"], request.get("params", []))
        except LookupError as exc:
            code, message = exc.args
            return 404 if code == -32601 else 500, {"result": None, "error": {"code": code, "message": message}, "id": request["id"]}
        return 200, {"result": result, "error": None, "id": request["id"]}

    def dispatch(self, chain: ChainView, method: str, params: list) -> object:
        if method in _MEMPOOL_RPCS and self.server.mempool is not None:
            return getattr(self, method)(chain, self.server.mempool, params)
        if method == "getblockcount":
            return chain.best()[0]
        if method == "getblockchaininfo":
            height, hash32 = chain.best()
            return {"chain": "regtest", "blocks": height, "headers": height, "bestblockhash": hash32[::-1].hex()}
        if method == "getblockhash":
            self.gate(params[0])
            hash32 = chain.hash_at(params[0])
            if hash32 is None:
                raise LookupError(-8, "Block height out of range")
            return hash32[::-1].hex()
        if method == "getblock":
            hash32 = _hash32(params[0])
            if hash32 is None:
                raise LookupError(-8, f"blockhash must be of length 64 (not {len(params[0])}, for '{params[0]}')")
            found = chain.lookup(hash32)
            if found is None:
                raise LookupError(-5, "Block not found")
            height, raw, spent = found
            if height < self.server.pruned_below:
                raise LookupError(-1, "Block not available (pruned data)")
            if params[1] == 0:
                return raw.hex()
            if spent is None:
                raise LookupError(-1, "Can't read undo data from disk")
            return bf.block_json(raw, parse_spent(spent), height)
        if method == "sendrawtransaction":
            try:
                tx = CTransaction.deserialize(bytes.fromhex(params[0]))
            except (ValueError, TypeError, SerializationError):
                raise LookupError(-22, "TX decode failed") from None
            self.server.relayed.append(params[0])
            return tx.GetTxid()[::-1].hex()
        return self.electrumx_call(chain, method, params)

    def electrumx_call(self, chain: ChainView, method: str, params: list) -> object:
        """The other calls ElectrumX (e-x 2.x) makes of Core 31 (node facts, fee estimates), and without a
        stand-in mempool an empty one and a txindex over the chain."""
        height = chain.best()[0]
        if method == "getnetworkinfo":
            return {"version": 310000, "subversion": "/Satoshi:31.0.0/", "protocolversion": 70016, "relayfee": 0.00001,
                    "incrementalfee": 0.00001, "networkactive": True, "connections": 0, "warnings": ""}  # fmt: skip
        if method == "getindexinfo":
            return {name: {"synced": True, "best_block_height": height} for name in ("txindex", "txospenderindex")}
        if method == "estimatesmartfee":
            return {"feerate": 0.00002, "blocks": 2}
        if method == "getrawmempool":
            return []
        if method == "getmempoolinfo":
            relayed = self.server.relayed  # what sendrawtransaction accepted
            return {"loaded": True, "size": len(relayed), "bytes": sum(len(h) // 2 for h in relayed), "mempoolminfee": 0.00001, "minrelaytxfee": 0.00001, "incrementalrelayfee": 0.00001}
        if method == "getrawtransaction":
            raw = transactions(chain).get(params[0])
            if raw is None:
                raise LookupError(-5, "No such mempool or blockchain transaction. Use gettransaction for wallet transactions.")
            return raw.hex()
        raise LookupError(-32601, "Method not found")


    # --- the mempool's calls (Core's rpc/mempool.cpp, rpc/rawtransaction.cpp, rpc/blockchain.cpp) ---

    def getrawmempool(self, chain: ChainView, mempool, params: list) -> object:
        verbose, sequence = (bool(params[i]) if len(params) > i else False for i in (0, 1))
        if verbose and sequence:
            raise LookupError(-8, "Verbose results cannot contain mempool sequence values.")
        if verbose:
            return _decimals(mempool.verbose())
        with mempool.lock:
            txids = [t[::-1].hex() for t in mempool.txids()]
            return {"txids": txids, "mempool_sequence": mempool.sequence} if sequence else txids

    def getmempoolinfo(self, chain: ChainView, mempool, params: list) -> object:
        return _decimals(mempool.info())

    def getrawtransaction(self, chain: ChainView, mempool, params: list) -> object:
        txid32 = _hash32(params[0]) if params and isinstance(params[0], str) else None
        if txid32 is None:
            raise LookupError(-8, "parameter 1 must be of length 64")
        if len(params) > 1 and params[1] not in (0, False, None):
            raise LookupError(-8, "verbose transactions are not served by this test server")
        raw = mempool.raw(txid32)
        if raw is None:
            raise LookupError(-5, "No such mempool transaction. Use -txindex or provide a block hash to enable blockchain transaction queries. Use gettransaction for wallet transactions.")
        return raw.decode() if raw == GARBAGE else raw.hex()

    def gettxout(self, chain: ChainView, mempool, params: list) -> object:
        txid32 = _hash32(params[0]) if params and isinstance(params[0], str) else None
        if txid32 is None or len(params) < 2 or not isinstance(params[1], int):
            raise LookupError(-8, "txid and n are required")
        with mempool.lock:
            height, tip = chain.best()
            coin = mempool.coins([txid32 + params[1].to_bytes(4, "little")], params[2] if len(params) > 2 else True)[0]
        if coin is None:
            return None
        h, out, coinbase = coin
        confirmations = 0 if h == MEMPOOL_HEIGHT else height - h + 1
        return {"bestblock": tip[::-1].hex(), "confirmations": confirmations, "value": bf.btc(out.amount), "scriptPubKey": _script_json(out.script), "coinbase": coinbase}


_MEMPOOL_RPCS = ("getrawmempool", "getmempoolinfo", "getrawtransaction", "gettxout")


def transactions(chain: ChainView) -> dict[str, bytes]:
    """Display txid -> raw transaction of every transaction on the active chain (a txindex), built again
    only when the chain's tip moved (kept on the chain object)."""
    from bitcoin.core import CBlock

    tip = chain.best()
    cached = getattr(chain, "_txindex", None)
    if cached is not None and cached[0] == tip:
        return cached[1]
    out = {}
    for height in range(tip[0] + 1):
        for tx in CBlock.deserialize(chain.lookup(chain.hash_at(height))[1]).vtx:
            out[tx.GetTxid()[::-1].hex()] = tx.serialize()
    chain._txindex = (tip, out)
    return out


def _script_json(script: bytes) -> dict:
    """A scriptPubKey as Core's JSON gives it (asm and desc left empty; hex and type as Core has them)."""
    kinds = {ScriptType.P2TR: "witness_v1_taproot", ScriptType.P2WPKH: "witness_v0_keyhash", ScriptType.P2PKH: "pubkeyhash", ScriptType.P2SH: "scripthash"}
    return {"asm": "", "desc": "", "hex": script.hex(), "type": kinds.get(script_type(script), "nonstandard")}


def _decimals(obj: object) -> object:
    """Floats as Core writes amounts (Decimal, so bf.dumps prints them plainly)."""
    if isinstance(obj, float):
        return Decimal(repr(obj))
    if isinstance(obj, dict):
        return {k: _decimals(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decimals(v) for v in obj]
    return obj


class NodeServer:
    """Run a handler over a ChainView on 127.0.0.1 in a background thread; `url` to reach it, `stop()` to end it.

    With `pruned_below`, blocks below that height answer as a pruned Core's do.

    The chain is read on every request, so blocks mined or reorganised while a
    client syncs are served as a node would serve them.
    """

    def __init__(self, handler: type[_Base], chain: ChainView, credentials: str = "", delay: float = 0.0, pruned_below: int = 0, mempool=None) -> None:
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.httpd.chain = chain
        self.httpd.pruned_below = pruned_below  # blocks below it answer as a pruned node's do
        self.httpd.mempool = mempool  # a node_mempool.NodeMempool, or None (the mempool routes answer 404)
        self.httpd.credentials = credentials
        self.httpd.delay = delay
        self.httpd.requests = []
        self.httpd.relayed = []  # raw tx hex that sendrawtransaction accepted
        self.httpd.lock = threading.Lock()
        self.httpd.budget = None
        self.httpd.hold_from = None
        self.httpd.held, self.httpd.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list:
        return self.httpd.requests

    def stop_answering(self, after: int = 0) -> None:
        """Answer `after` more requests, then close every connection unanswered (a node that stopped answering)."""
        with self.httpd.lock:
            self.httpd.budget = after

    def resume_answering(self) -> None:
        """Answer every request again."""
        with self.httpd.lock:
            self.httpd.budget = None

    def hold(self, height: int) -> None:
        """Hang every request for the block hash at `height` or above (a node that stops answering without
        closing the connection) until `release`; `held` is set once one hangs."""
        self.httpd.released.clear()
        self.httpd.held.clear()
        self.httpd.hold_from = height

    @property
    def held(self) -> threading.Event:
        return self.httpd.held

    def release(self) -> None:
        """Answer the held requests and hold no more."""
        self.httpd.hold_from = None
        self.httpd.released.set()

    def stop(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> NodeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def node_fixtures(chain: ChainView, credentials: str):
    """Module-scoped `rest` and `rpc` fixtures: Core-like REST and JSON-RPC servers over `chain` (RPC with
    `credentials`, "user:password"); a test module takes them with `rest, rpc = node_fixtures(...)`."""

    @pytest.fixture(scope="module")
    def rest():
        with NodeServer(RestHandler, chain) as server:
            yield server

    @pytest.fixture(scope="module")
    def rpc():
        with NodeServer(RpcHandler, chain, credentials=credentials) as server:
            yield server

    return rest, rpc


def closed_port_url() -> str:
    """A 127.0.0.1 URL on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
