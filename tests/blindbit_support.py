"""Test support for the BlindBit v1 wallet source: a proxy in front of `sp-scan serve` that can hold,
drop or rewrite answers, and a server of BlindBit's own recorded answers (vectors/blindbit/).

Both are HTTP servers on 127.0.0.1 in a thread, used as context managers; `.url` reaches them.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from coincurve import PrivateKey, PublicKey

from serving import ok
from sp_scan.crypto import ser32, tagged_hash
from sp_scan.filters import new_utxos_filter

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "vectors" / "blindbit"
_HEIGHT = re.compile(r"/(?:tweak-index|tweaks|utxos|spent-index|block-hash|filter/new-utxos|filter/spent)/([0-9]+)")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def height_of(path: str) -> int | None:
    """The height a BlindBit route names, or None (/info, /block-height)."""
    found = _HEIGHT.match(path)
    return int(found.group(1)) if found else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that hangs up is not a server failure


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:
        pass

    def send(self, status: int, body: bytes, headers: dict[str, str], length: int | None = None) -> None:
        """Answer `body` with its headers; `length` > len(body): announce that many bytes, send only `body`."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802
        self.server.owner.handle(self)


class _Threaded:
    def __init__(self) -> None:
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.owner = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class Knobs:
    """A stand-in's knobs (see remote_support's docstring): hold and release, stop and resume answering, cut once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tamper: Callable | None = None
        self.holding: Callable | None = None
        self.released = threading.Event()
        self.held = 0
        self.budget: int | None = None
        self.cut_at: Callable | None = None
        self.seen: list = []

    def cut_once(self, pred: Callable) -> None:
        self.cut_at = pred

    def _cut_here(self, *args) -> bool:
        with self.lock:
            pred = self.cut_at
            if pred is None or not pred(*args):
                return False
            self.cut_at = None
            return True

    def hold(self, pred: Callable) -> None:
        """Keep back every message for which pred(...) holds (the proxy's own arguments) until `release()`."""
        self.released.clear()
        with self.lock:
            self.held = 0
        self.holding = pred

    def release(self) -> None:
        self.holding = None
        self.released.set()

    def stop_answering(self, after: int = 0) -> None:
        with self.lock:
            self.budget = after

    def resume_answering(self) -> None:
        with self.lock:
            self.budget = None

    def _spend(self) -> bool:
        """Take one message of the budget; False once it is spent."""
        with self.lock:
            if self.budget is None:
                return True
            self.budget -= 1
            return self.budget >= 0

    def _wait(self, *args) -> None:
        holding = self.holding
        if holding is not None and holding(*args):
            with self.lock:
                self.held += 1
            self.released.wait()


class Proxy(_Threaded, Knobs):
    """Forward every GET to `upstream` (an `sp-scan serve`), recording it, with these knobs:

    - `hold(height)`: hang requests for that height or above until `release()`; `held` counts them.
    - `stop_answering(after)`: answer `after` more requests, then close connections unanswered.
    - `tamper`: f(path, json_body) -> a new JSON value, or bytes to send as they are, or None to
      send the upstream answer unchanged (then asked without gzip).
    - `stall(prefix)`: answer requests whose path starts with `prefix` with half their body, then
      nothing until `release()`; `stalled` counts them.
    """

    def __init__(self, upstream: str) -> None:
        _Threaded.__init__(self)
        Knobs.__init__(self)
        self.upstream = upstream
        self.paths: list[str] = []
        self.stalling: str | None = None
        self.stalled = 0

    def stall(self, prefix: str) -> None:
        self.released.clear()
        self.stalling = prefix

    def hold(self, height: int) -> None:
        super().hold(lambda path: (h := height_of(path)) is not None and h >= height)

    def close(self) -> None:
        self.release()
        super().close()

    def handle(self, h: _Handler) -> None:
        path = h.path
        with self.lock:
            self.paths.append(path)
        if not self._spend():
            h.close_connection = True
            return
        self._wait(path)
        tamper = self.tamper
        headers = {} if tamper else {k: v for k, v in h.headers.items() if k.lower() == "accept-encoding"}
        request = urllib.request.Request(self.upstream + path, headers=headers)
        try:
            with _OPENER.open(request, timeout=30) as reply:
                status, body, kept = reply.status, reply.read(), dict(reply.headers)
        except urllib.error.HTTPError as err:
            status, body, kept = err.code, err.read(), dict(err.headers)
        out = {k: v for k, v in kept.items() if k.lower() in ("content-type", "content-encoding")}
        if tamper is not None and status == 200:
            changed = tamper(path, json.loads(body))
            if changed is not None:
                body = changed if isinstance(changed, bytes) else json.dumps(changed).encode()
        if self.stalling is not None and path.startswith(self.stalling):
            with self.lock:
                self.stalled += 1
            h.send(status, body[: len(body) // 2], out, length=len(body))
            self.released.wait()
            h.close_connection = True
            return
        h.send(status, body, out)

    def count(self, prefix: str) -> int:
        """Requests whose path starts with `prefix`."""
        with self.lock:
            return sum(p.startswith(prefix) for p in self.paths)


class Recorded(_Threaded):
    """BlindBit's recorded answers for signet blocks 200000, 200001, 295125 and 295147 (vectors/blindbit/),
    as its server gives them: /tweaks (cut-through, as spdk's test asks), both filters, /utxos and
    /spent-index from the files; /block-hash from the filters; /info and /block-height as a signet
    oracle at 295147. Other heights answer 404 with a JSON error, as BlindBit does."""

    TIP = 295147

    def handle(self, h: _Handler) -> None:
        path = h.path.split("?")[0]
        height = height_of(path)
        files = {"tweaks": "tweaks.json", "utxos": "utxos.json", "spent-index": "spent-index.json", "filter/new-utxos": "filter-new-utxos.json", "filter/spent": "filter-spent.json"}
        if path == "/info":
            body = {"network": "signet", "height": self.TIP, "tweaks_only": False, "tweaks_full_basic": True, "tweaks_full_with_dust_filter": True, "tweaks_cut_through_with_dust_filter": True}
        elif path == "/block-height":
            body = {"block_height": self.TIP}
        elif height is not None and (VECTORS / str(height)).is_dir():
            route = path[1:].rsplit("/", 1)[0]
            if route == "block-hash":
                body = {"block_hash": json.loads((VECTORS / str(height) / "filter-new-utxos.json").read_text())["block_hash"]}
            elif route in files:
                h.send(200, (VECTORS / str(height) / files[route]).read_bytes(), {"Content-Type": "application/json"})
                return
            else:
                h.send(404, b'{"error":"not served"}', {"Content-Type": "application/json"})
                return
        else:
            h.send(404, b'{"error":"block not found"}', {"Content-Type": "application/json"})
            return
        h.send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})


# ---- attacks a BlindBit server can make on a wallet (it needs the wallet's address, not its scan key) ----

INVENTED = 50_000 * 10**8
"""The amount of the coin `invent` lists: 50,000 BTC."""
INFLATED = 2 * 10**15
"""The amount `inflate` gives an honest output (under the 21 million bitcoin any answer may hold)."""


def invent(proxy: Proxy, height: int, scan_pubkey33: bytes, spend_pubkey33: bytes) -> str:
    """Make `proxy` list at `height` a coin of INVENTED sats paying the address: its own tweak a·G among the block's,
    an output B_spend + t_0·G built from a·B_scan, a txid of no transaction, the new-UTXO filter made to agree.
    Returns the invented txid (display hex)."""
    a = hashlib.sha256(b"the server's own key").digest()
    ecdh33 = PublicKey(scan_pubkey33).multiply(a).format()
    output32 = PublicKey(spend_pubkey33).add(tagged_hash("BIP0352/SharedSecret", ecdh33 + ser32(0))).format()[1:]
    txid = hashlib.sha256(b"no such transaction").hexdigest()

    def tamper(path: str, body):
        route, _, rest = path.partition("?")[0].rpartition("/")
        if rest != str(height):
            return None
        if route in ("/tweak-index", "/tweaks"):
            return [*body, PrivateKey(a).public_key.format().hex()]
        if route == "/utxos":
            forged = {"txid": txid, "vout": 0, "value": INVENTED, "scriptpubkey": "5120" + output32.hex(), "block_height": height, "block_hash": body[0]["block_hash"], "timestamp": body[0]["timestamp"], "spent": False}
            return [*body, forged]
        if route == "/filter/new-utxos":
            keys = [bytes.fromhex(u["scriptpubkey"][4:]) for u in ok(f"{proxy.upstream}/utxos/{height}")] + [output32]
            return {**body, "data": new_utxos_filter(bytes.fromhex(body["block_hash"])[::-1], keys).hex()}
        return None

    proxy.tamper = tamper
    return txid


def inflate(proxy: Proxy, height: int, output_hex: str) -> None:
    """Make `proxy`'s /utxos at `height` give the output of key `output_hex` INFLATED sats."""
    proxy.tamper = lambda path, body: [{**u, "value": INFLATED} if u["scriptpubkey"][4:] == output_hex else u for u in body] if path == f"/utxos/{height}" else None
