"""Test support for the CLI: importing it from the source tree, and local Core-like HTTP servers."""

from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import blockfactory as bf

ROOT = Path(__file__).resolve().parent.parent


def load_cli():
    """Import sp_scan.cli; from a source checkout, map cli/ to it as pyproject.toml does."""
    try:
        return importlib.import_module("sp_scan.cli")
    except ModuleNotFoundError:
        pass
    import sp_scan

    spec = importlib.util.spec_from_file_location("sp_scan.cli", ROOT / "cli" / "__init__.py", submodule_search_locations=[str(ROOT / "cli")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["sp_scan.cli"] = module
    spec.loader.exec_module(module)
    sp_scan.cli = module
    return module


# --- Core-like servers (127.0.0.1 only, one thread per request, stopped by the fixture) ---


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
        self.by_hash = {tb.hash_hex: tb for tb in self.blocks}

    @property
    def tip(self) -> int:
        return len(self.blocks) - 1

    def expected_tweaks(self, start: int, stop: int) -> list[dict]:
        """What the vectors say `tweaks` prints for heights start..stop."""
        out = []
        for tb in self.blocks[start : stop + 1]:
            for tx, case in zip(tb.txs[1:], tb.cases):
                if case["expected"]["tweak"]:
                    out.append({"txid": tx.GetTxid()[::-1].hex(), "tweak": case["expected"]["tweak"]})
        return out


def spending_chain(length: int, fork: Chain | None = None, fork_height: int = 0, salt: int = 0) -> Chain:
    """A chain of blocks paying the vectors' first wallet, where every third block spends earlier taproot outputs.

    A spending block spends all taproot outputs of one earlier tx (cut through; which one depends on
    `salt`) and the first output of another (not cut through). With `fork`, the chain is fork's blocks below `fork_height`, then new
    blocks (different for another `salt`) up to `length` - 1.
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
            other = next(o for o in outputs if o[0] == (many or [t for t in txids if t != cut])[0])
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
    server: _Server

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class RestHandler(_Base):
    """Serves /rest/ paths as Core's rest.cpp does (bodies, content types, error texts)."""

    def error(self, status: int, message: str) -> None:
        self.reply(status, (message + "\r\n").encode(), "text/plain")

    def do_GET(self) -> None:  # noqa: N802
        chain: Chain = self.server.chain
        self.server.requests.append(self.path)
        time.sleep(self.server.delay)
        if self.server.answer_limit is not None and len(self.server.requests) > self.server.answer_limit:
            self.close_connection = True  # hang up without a reply: the node stopped answering
            return
        path = self.path.split("?", 1)[0]
        if path == "/rest/chaininfo.json":
            info = {"chain": "regtest", "blocks": chain.tip, "headers": chain.tip, "bestblockhash": chain.blocks[-1].hash_hex}
            return self.reply(200, (json.dumps(info) + "\n").encode(), "application/json")
        for prefix in ("/rest/blockhashbyheight/", "/rest/block/", "/rest/spenttxouts/"):
            if path.startswith(prefix):
                param, _, fmt = path[len(prefix) :].rpartition(".")
                if fmt not in ("bin", "hex", "json"):
                    return self.error(404, "output format not found (available: .bin, .hex, .json)")
                return getattr(self, prefix.split("/")[2])(chain, param, fmt)
        self.error(404, "not found")

    def blockhashbyheight(self, chain: Chain, param: str, fmt: str) -> None:
        if not param.isdigit():
            return self.error(400, f"Invalid height: {param}")
        if int(param) > chain.tip:
            return self.error(404, "Block height out of range")
        tb = chain.blocks[int(param)]
        if fmt == "bin":
            return self.reply(200, tb.header.GetHash(), "application/octet-stream")
        if fmt == "hex":
            return self.reply(200, (tb.hash_hex + "\n").encode(), "text/plain")
        self.reply(200, (json.dumps({"blockhash": tb.hash_hex}) + "\n").encode(), "application/json")

    def _lookup(self, chain: Chain, param: str):
        tb = chain.by_hash.get(param)
        if tb is None:
            self.error(404, f"{param} not found")
        return tb

    def block(self, chain: Chain, param: str, fmt: str) -> None:
        tb = self._lookup(chain, param)
        if tb is None:
            return
        if fmt == "json":
            return self.error(404, "json not served by this test server")
        self._data(tb.raw, fmt)

    def spenttxouts(self, chain: Chain, param: str, fmt: str) -> None:
        tb = self._lookup(chain, param)
        if tb is None:
            return
        if fmt == "json":
            return self.reply(200, bf.spenttxouts_json(tb).encode(), "application/json")
        self._data(tb.spent_bytes, fmt)

    def _data(self, data: bytes, fmt: str) -> None:
        if fmt == "bin":
            self.reply(200, data, "application/octet-stream")
        else:
            self.reply(200, (data.hex() + "\n").encode(), "text/plain")


class RpcHandler(_Base):
    """A JSON-RPC 1.0 endpoint with Basic auth, answering as Core does for the calls sp-scan makes."""

    def do_POST(self) -> None:  # noqa: N802
        chain: Chain = self.server.chain
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        expected = "Basic " + base64.b64encode(self.server.credentials.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.server.requests.append("401")
            return self.reply(401, b"", "text/html")
        time.sleep(self.server.delay)
        request = json.loads(body)
        self.server.requests.append(request["method"])
        try:
            result = self.dispatch(chain, request["method"], request["params"])
        except LookupError as exc:
            code, message = exc.args
            reply = {"result": None, "error": {"code": code, "message": message}, "id": request["id"]}
            return self.reply(404 if code == -32601 else 500, (json.dumps(reply) + "\n").encode(), "application/json")
        reply = bf.dumps({"result": result, "error": None, "id": request["id"]}) + "\n"
        self.reply(200, reply.encode(), "application/json")

    def dispatch(self, chain: Chain, method: str, params: list) -> object:
        if method == "getblockcount":
            return chain.tip
        if method == "getblockchaininfo":
            return {"chain": "regtest", "blocks": chain.tip, "bestblockhash": chain.blocks[-1].hash_hex}
        if method == "getblockhash":
            if not 0 <= params[0] <= chain.tip:
                raise LookupError(-8, "Block height out of range")
            return chain.blocks[params[0]].hash_hex
        if method == "getblock":
            tb = chain.by_hash.get(params[0])
            if tb is None:
                raise LookupError(-5, "Block not found")
            height = chain.blocks.index(tb)
            return tb.raw.hex() if params[1] == 0 else bf.getblock3(tb, height)
        raise LookupError(-32601, "Method not found")


class NodeServer:
    """Run a handler on 127.0.0.1 in a background thread; `url` to reach it, `stop()` to end it."""

    def __init__(self, handler: type[_Base], chain: Chain, credentials: str = "", delay: float = 0.0) -> None:
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.httpd.chain = chain
        self.httpd.credentials = credentials
        self.httpd.delay = delay
        self.httpd.requests = []
        self.httpd.answer_limit = None
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list:
        return self.httpd.requests

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> NodeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port_url() -> str:
    """A 127.0.0.1 URL on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
