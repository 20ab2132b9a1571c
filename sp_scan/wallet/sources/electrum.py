"""What the Electrum sources (`--electrum`: Frigate, `--cake`: Cake's electrs) share: a JSON-RPC client, the
chain's headers, transactions proven in their blocks, and spends read from scripts' histories.

Client: the Electrum protocol (newline-delimited JSON-RPC 2.0) over TCP or TLS, `server.version` first as
Sparrow sends it; requests can be pipelined (sent together, answers matched by id); notifications of the
methods a source listens to are kept for it, others dropped. Every line is bounded (`MAX_LINE`) and
counted in `received`. A connection that fails is closed and opened again by the next call; the
failed call raises `ServerError`, which callers retry through `Retry`.

Trust: headers (`blockchain.block.headers`) are checked as Core checks them before anything uses them
(`Headers`: `sp_scan.headers.HeaderChain`, from the network's checkpoint: proof of work against each
header's own nBits, nBits against the chain's retarget rules, times); a block's hash is its header's
hash; the network is the genesis block's; the server's tip is a header that passes too. A transaction (`blockchain.transaction.get`) must hash to
its txid and `blockchain.transaction.get_merkle` must prove it under its block's merkle root: its
position orders a block's txs as the block does. A spend of a wallet output is read from the
history of its script (`blockchain.scripthash.get_history`, once a round per script): a tx of that
history at the block's height is fetched, proven in the block, and is the spend when one of its
inputs names the output. Answers that do not parse, exceed their bounds or contradict the proofs
raise `SourceError`.
"""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
from collections import deque
from collections.abc import Iterable, Sequence

from sp_scan import wire
from sp_scan.errors import MalformedDataError, ServerError, SourceError
from sp_scan.headers import Header, HeaderChain
from sp_scan.network import BY_GENESIS
from sp_scan.network import get as get_network
from sp_scan.retry import Retry, answered, time_left

from .base import MAX_BLOCK_TXS, RETRY, BlockTxs, Closes, Spend, endpoint, hex_bytes, integer, taproot_outputs

CLIENT = "sp-scan wallet"
PROTOCOL = ["1.4", "1.4.2"]
"""The protocol versions asked for in `server.version` (Sparrow's upper bound)."""
MAX_LINE = 32 << 20
"""The longest line read: a 2016-header batch is 322 kB of hex, a mainnet block's tweaks a few MB."""
MAX_NOTES = 100_000
MAX_NOTE_BYTES = 256 << 20
"""Notifications (and their bytes) kept unread before the server is refused as flooding."""
MAX_HISTORY = 10_000
"""More history entries for one output's script than a wallet output would have."""
MAX_TX_HEX = 8_000_000
"""A transaction is at most 4 MB."""
HEADERS_PER_CALL = 2016
PIPELINE = 64
"""Requests sent before their answers are read."""
TIMEOUT = 60.0
HEADER_BYTES = 80
TAPROOT = b"\x51\x20"


class Refused(ServerError):
    """The server answered a request with an error object (it does not have what was asked, or will not give it)."""


class ElectrumClient:
    """One connection to an Electrum server, opened (and negotiated) on the first call and after a failure.

    Args:
        host, port: the server.
        tls: wrap the connection in TLS, the certificate checked against the system's authorities
            (and SSL_CERT_FILE) for `host`.
        listen: the notification methods kept for `note` and `pending_notes`; others are dropped.
    """

    def __init__(self, host: str, port: int, tls: bool = False, listen: Iterable[str] = (), timeout: float = TIMEOUT) -> None:
        self.host, self.port, self.tls, self.timeout = host, port, tls, timeout
        self.url = f"{'ssl' if tls else 'tcp'}://{host}:{port}"
        self.listen = frozenset(listen)
        self.received = 0
        self._notes: deque[tuple[object, int]] = deque()
        self._note_bytes = 0
        self._sock: socket.socket | None = None
        self._file = None
        self._answers: dict[int, dict] = {}
        self._pending: set[int] = set()
        self._id = 0
        self._waiting = "server.version"

    # ---- the connection ----

    def _connect(self) -> None:
        self._waiting = "a connection"
        try:
            sock = socket.create_connection((self.host, self.port), timeout=time_left(self.timeout))
            if self.tls:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except OSError as exc:  # ssl.SSLError is one
            raise self._lost(exc) from None
        sock.settimeout(self.timeout)
        self._sock, self._file = sock, sock.makefile("rb")
        version = self.answer(self._send("server.version", [CLIENT, PROTOCOL]), "server.version")
        if not isinstance(version, list) or len(version) != 2:
            self.close()
            raise SourceError(f"the Electrum server at {self.url} answered server.version with {str(version)[:80]}")

    def close(self) -> None:
        """Close the connection (the next call opens another); answers and notes not yet read are dropped."""
        if self._file is not None:
            self._file.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._file = None
        self._answers.clear()
        self._pending.clear()
        self._notes.clear()
        self._note_bytes = 0

    def _lost(self, exc: BaseException | None) -> ServerError:
        self.close()
        reason = "it closed the connection" if exc is None else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
        return ServerError(f"cannot reach the Electrum server at {self.url} (waiting for {self._waiting}): {reason}")

    # ---- requests ----

    def send(self, method: str, params: list) -> int:
        """Send one request (connecting first when needed); its id.

        Raises:
            ServerError: the server cannot be reached.
        """
        if self._sock is None:
            self._connect()
        return self._send(method, params)

    def _send(self, method: str, params: list) -> int:
        self._id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}).encode() + b"\n"
        try:
            self._sock.sendall(line)
        except OSError as exc:
            raise self._lost(exc) from None
        self._pending.add(self._id)
        return self._id

    def answer(self, id_: int, method: str):
        """The result of request `id_` (reading notifications and other answers meanwhile).

        Raises:
            ServerError: the connection failed (Refused: the server answered with an error object).
            SourceError: a line that is not a JSON-RPC message, or over the bounds.
        """
        self._waiting = method
        while id_ not in self._answers:
            self._read()
        message = self._answers.pop(id_)
        error = message.get("error")
        if error is not None:
            text = error.get("message") if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            raise Refused(f"the Electrum server at {self.url} refused {method}: {' '.join(str(text).split())[:200]}" + (f" ({code})" if code is not None else ""))
        if "result" not in message:
            raise SourceError(f"the Electrum server at {self.url} answered {method} without a result")
        return message["result"]

    def call(self, method: str, params: list):
        """One request's result (see `answer`)."""
        return self.answer(self.send(method, params), method)

    def calls(self, requests: Sequence[tuple[str, list]]) -> list:
        """The results of many requests, PIPELINE of them sent before their answers are read."""
        out: list = []
        for i in range(0, len(requests), PIPELINE):
            chunk = requests[i : i + PIPELINE]
            ids = [self.send(method, params) for method, params in chunk]
            out += [self.answer(id_, method) for id_, (method, _) in zip(ids, chunk)]
        return out

    def note(self):
        """The params of the next notification of a method in `listen`, reading until one comes.

        Raises:
            ServerError: the connection failed or stayed silent for the timeout.
            SourceError: as `answer`.
        """
        self._waiting = f"a notification of {', '.join(sorted(self.listen))}"
        while not self._notes:
            self._read()
        params, size = self._notes.popleft()
        self._note_bytes -= size
        return params

    def pending_notes(self) -> list:
        """The params of the notifications read so far and not taken, oldest first (then forgotten)."""
        out = [params for params, _ in self._notes]
        self._notes.clear()
        self._note_bytes = 0
        return out

    def _read(self) -> None:
        if self._file is None:
            raise self._lost(None)
        try:
            self._sock.settimeout(time_left(self.timeout))
            line = self._file.readline(MAX_LINE + 1)
        except (OSError, ValueError) as exc:
            raise self._lost(exc) from None
        if not line:
            raise self._lost(None)
        self.received += len(line)
        answered()
        if len(line) > MAX_LINE:
            self.close()
            raise SourceError(f"the Electrum server at {self.url} sent a line of more than {MAX_LINE:,} bytes")
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            self.close()
            raise SourceError(f"the Electrum server at {self.url} sent a line that is not JSON") from None
        if not isinstance(message, dict):
            self.close()
            raise SourceError(f"the Electrum server at {self.url} sent a message that is not a JSON object")
        if "id" in message and message["id"] is not None:
            if message["id"] not in self._pending:
                self.close()
                raise SourceError(f"the Electrum server at {self.url} answered a request it was not sent")
            self._pending.discard(message["id"])
            self._answers[message["id"]] = message
        elif message.get("method") in self.listen:
            if len(self._notes) >= MAX_NOTES or self._note_bytes + len(line) > MAX_NOTE_BYTES:
                self.close()
                raise SourceError(f"the Electrum server at {self.url} sent more notifications than were asked for")
            self._notes.append((message.get("params"), len(line)))
            self._note_bytes += len(line)


class Headers:
    """The server's headers, each checked (`sp_scan.headers.HeaderChain`) before `get` gives it: those at or below
    the network's checkpoint lead up to its hash, those above it follow the chain's rules from there.

    Args:
        client: the server.
        network: its chain's name.
    """

    def __init__(self, client: ElectrumClient, network: str) -> None:
        self.client = client
        self.chain = HeaderChain(get_network(network).pow)

    def get(self, start: int, count: int) -> list[bytes]:
        """The server's headers of heights start..start + count - 1, asked for now and checked (with the headers
        below them the rules need, asked for once).

        Raises:
            ServerError: a request fails.
            SourceError: a header the checks refuse, or a chain that is not the network's.
        """
        c = self.chain
        fetched = headers(self.client, start, count)
        if c.base < 0:
            lo = c.start(start)
            c.anchor(lo, headers(self.client, lo, c.checkpoint - lo + 1))
        if start < c.base:
            c.anchor(start, headers(self.client, start, c.base - start))
        if start > c.top + 1:
            c.extend(c.top + 1, headers(self.client, c.top + 1, start - c.top - 1))
        lo, batch = start, fetched
        while lo - 1 > max(c.base, c.checkpoint) and Header.parse(batch[0]).prev32 != c.hash32(lo - 1):  # the server switched branches below
            below = max(c.base + 1, c.checkpoint + 1, lo - HEADERS_PER_CALL)
            batch, lo = headers(self.client, below, lo - below) + batch, below
        c.extend(lo, batch)
        return fetched


class ElectrumSource(Closes):
    """What the Electrum sources share: the chain as the server's headers name it (checked), every call retried; a
    `Prover` (a transaction and its merkle proof under a checked header), alone what `--verify-with tcp://…` uses.

    Args:
        url: `tcp://HOST:PORT`, or `ssl://HOST:PORT` (TLS, the certificate checked against the system's authorities).
        retry: how a failing request is tried again.
        timeout: seconds to wait for the server.

    Raises:
        SourceURLError: another URL.
    """

    KIND = "the Electrum server"
    """How messages name the server ("Frigate")."""
    LISTEN: tuple[str, ...] = ()
    """The notification methods the source reads."""
    SCHEMES = ("tcp", "ssl")

    def __init__(self, url: str, *, retry: Retry = RETRY, timeout: float = TIMEOUT) -> None:
        scheme, host, port = endpoint(url, self.SCHEMES, self.KIND)
        self.client = ElectrumClient(host, port, scheme.endswith("ssl"), listen=self.LISTEN, timeout=timeout)
        self.name = f"{self.KIND} at {self.client.url}"
        self.retry = retry
        self._network: str | None = None
        self._headers: Headers | None = None
        self.proves, self.complete = True, False

    @property
    def received(self) -> int:
        """Bytes of answers and notifications read."""
        return self.client.received

    @property
    def headers(self) -> Headers:
        """The server's checked headers (its network asked for first)."""
        if self._headers is None:
            self._headers = Headers(self.client, self.network())
        return self._headers

    def network(self) -> str:
        if self._network is None:
            self._network = self.retry.call(self._chain)
        return self._network

    def _chain(self) -> str:
        return network(self.client)

    def tip_height(self) -> int:
        """The server's tip height, once its tip header passed the checks.

        Raises:
            SourceError: the tip header is refused, or is not the server's header at that height.
        """
        return self.retry.call(self._tip)

    def _tip(self) -> int:
        height, header80 = tip(self.client)
        if self.headers.get(height, 1) != [header80]:
            raise SourceError(f"{self.name}'s tip header is not its header of block {height}")
        return height

    def block_hash(self, height: int) -> bytes:
        return block_hash32(self.retry.call(self.headers.get, height, 1)[0])

    def outputs(self, height: int, hash32: bytes, txids32: Sequence[bytes]) -> dict[bytes, list[tuple[int, bytes, int]]] | None:
        """The taproot outputs of the txs the server proves in its block of this height, when it has that hash (see
        `Prover`); a tx it does not have (its error answer) is left out.

        Raises:
            ServerError: the server fails after the retries.
            SourceError: a header, a transaction or a proof the checks refuse.
        """
        return self.retry.call(self._outputs, height, hash32, txids32)

    def _outputs(self, height: int, hash32: bytes, txids32: Sequence[bytes]) -> dict[bytes, list[tuple[int, bytes, int]]] | None:
        (header80,) = self.headers.get(height, 1)
        if block_hash32(header80) != hash32:
            return None
        out = {}
        for txid32 in txids32:
            try:
                (_, tx), = proven_txs(self.client, [(height, header80, txid32)]).values()
            except Refused:
                continue
            out[txid32] = taproot_outputs(tx)
        return out

    def work(self, lo: int, hi: int) -> int:
        """The chain work of the server's (checked) headers lo..hi."""
        self.retry.call(self.headers.get, lo, hi - lo + 1)
        return self.headers.chain.work(lo, hi)

    def close(self) -> None:
        self.client.close()


# ---- the chain ----


def network(client: ElectrumClient) -> str:
    """The chain the server is on, named by its genesis block.

    Raises:
        SourceError: a genesis block of no chain this knows.
    """
    genesis = block_hash32(header_at(client, 0))[::-1].hex()
    if genesis not in BY_GENESIS:
        raise SourceError(f"the Electrum server at {client.url} is on a chain whose genesis block is {genesis}, not one of {', '.join(BY_GENESIS.values())}")
    return BY_GENESIS[genesis]


def block_hash32(header80: bytes) -> bytes:
    return wire.sha256d(header80)


def tip(client: ElectrumClient) -> tuple[int, bytes]:
    """(height, header80) of the server's tip, as it says (`blockchain.headers.subscribe`), unchecked."""
    reply = client.call("blockchain.headers.subscribe", [])
    if not isinstance(reply, dict):
        raise SourceError(f"the Electrum server at {client.url} answered blockchain.headers.subscribe with {str(reply)[:80]}")
    header80 = hex_bytes(reply.get("hex"), HEADER_BYTES, "blockchain.headers.subscribe's header")
    return integer(reply.get("height"), 0, 2**31, "blockchain.headers.subscribe's height"), header80


def header_at(client: ElectrumClient, height: int) -> bytes:
    return hex_bytes(client.call("blockchain.block.header", [height]), HEADER_BYTES, f"the header of block {height}")


def headers(client: ElectrumClient, start: int, count: int) -> list[bytes]:
    """The headers of heights start..start + count - 1 as the server gives them, each checked to name the previous
    one (`Headers.get` checks the rest).

    Raises:
        SourceError: fewer headers than asked for, a malformed answer, or headers that do not chain.
    """
    out: list[bytes] = []
    while len(out) < count:
        at, want = start + len(out), min(count - len(out), HEADERS_PER_CALL)
        reply = client.call("blockchain.block.headers", [at, want])
        what = f"blockchain.block.headers({at}, {want})"
        if not isinstance(reply, dict):
            raise SourceError(f"{what} is not an object")
        raw = hex_bytes(reply.get("hex"), None, f"{what}: hex")
        got = integer(reply.get("count"), 0, want, f"{what}: count")
        if len(raw) != HEADER_BYTES * got or got == 0:
            raise SourceError(f"{what}: {len(raw)} bytes for {got} headers, of {want} asked for")
        out += [raw[i : i + HEADER_BYTES] for i in range(0, len(raw), HEADER_BYTES)]
    for i in range(1, len(out)):
        if out[i][4:36] != block_hash32(out[i - 1]):
            raise SourceError(f"the header of block {start + i} does not name block {start + i - 1} as its parent")
    return out


# ---- transactions proven in their blocks ----


def merkle_root(txid32: bytes, branch: object, pos: object, what: str) -> bytes:
    """The root a merkle branch (display hex, bottom up) leads to from txid32 at position pos.

    Raises:
        SourceError: a malformed branch, or a position it cannot have.
    """
    if not isinstance(branch, list) or len(branch) > 32:
        raise SourceError(f"{what}: the merkle branch is not a list of at most 32 hashes")
    pos = integer(pos, 0, 2 ** len(branch) - 1, f"{what}: pos")
    node = txid32
    for i, sibling in enumerate(branch):
        sibling32 = hex_bytes(sibling, 32, f"{what}: a merkle branch hash")[::-1]
        node = wire.sha256d(sibling32 + node) if pos >> i & 1 else wire.sha256d(node + sibling32)
    return node


def proven_txs(client: ElectrumClient, wanted: Sequence[tuple[int, bytes, bytes]]) -> dict[bytes, tuple[int, wire.RawTx]]:
    """Transactions proven in their blocks, all asked for at once: for each (height, header80, txid32), the
    tx's position in its block and its parsed form, by txid32.

    Raises:
        ServerError: a request fails.
        SourceError: a transaction that does not parse or hash to its txid, or a proof that does not
            lead to its block's merkle root.
    """
    requests = []
    for height, _, txid32 in wanted:
        requests += [("blockchain.transaction.get", [txid32[::-1].hex()]), ("blockchain.transaction.get_merkle", [txid32[::-1].hex(), height])]
    answers = client.calls(requests)
    out = {}
    for j, (height, header80, txid32) in enumerate(wanted):
        raw_hex, proof = answers[2 * j], answers[2 * j + 1]
        what = f"transaction {txid32[::-1].hex()} of block {height}"
        tx = parsed_tx(raw_hex, txid32, what)
        if not isinstance(proof, dict) or proof.get("block_height") not in (None, height):
            raise SourceError(f"{what}: the merkle proof is not of block {height}")
        if merkle_root(txid32, proof.get("merkle"), proof.get("pos"), what) != header80[36:68]:
            raise SourceError(f"{what}: the merkle proof does not lead to the block's merkle root")
        out[txid32] = (proof["pos"], tx)
    return out


def parsed_tx(raw_hex: object, txid32: bytes, what: str) -> wire.RawTx:
    """`blockchain.transaction.get`'s answer parsed, checked to hash to txid32.

    Raises:
        SourceError: not a transaction's hex, or another transaction.
    """
    if not isinstance(raw_hex, str) or len(raw_hex) > MAX_TX_HEX:
        raise SourceError(f"{what}: blockchain.transaction.get's answer is not a transaction's hex")
    try:
        tx = wire.parse_tx(hex_bytes(raw_hex, None, what))
    except MalformedDataError as exc:
        raise SourceError(f"{what} does not parse: {exc}") from None
    if tx.txid32 != txid32:
        raise SourceError(f"{what}: the server's transaction hashes to {tx.txid32[::-1].hex()}")
    return tx


def block_txs(proven: dict[bytes, tuple[int, wire.RawTx]], tweaks33: dict[bytes, bytes]) -> BlockTxs:
    """The proven txs with their tweaks and taproot outputs, in block order."""
    ordered = sorted(proven.items(), key=lambda item: item[1][0])
    return BlockTxs.of((txid32, tweaks33[txid32], taproot_outputs(tx)) for txid32, (_, tx) in ordered)


# ---- spends ----


def scripthash(output32: bytes) -> str:
    """The Electrum script hash of the P2TR output of key output32 (display hex)."""
    return hashlib.sha256(TAPROOT + output32).digest()[::-1].hex()


class Spends:
    """The spends of wallet outputs, from their scripts' histories read once (a round's worth)."""

    def __init__(self, client: ElectrumClient) -> None:
        self.client = client
        self.history: dict[str, list[tuple[int, bytes]]] = {}

    def _read(self, hashes: list[str]) -> None:
        for sh, reply in zip(hashes, self.client.calls([("blockchain.scripthash.get_history", [sh]) for sh in hashes])):
            what = f"the history of script hash {sh}"
            if not isinstance(reply, list) or len(reply) > MAX_HISTORY:
                raise SourceError(f"{what} is not a list of at most {MAX_HISTORY:,} entries")
            entries = []
            for e in reply:
                if not isinstance(e, dict):
                    raise SourceError(f"{what}: an entry is not an object")
                height = integer(e.get("height"), -1, 2**31, f"{what}: height")
                entries.append((height, hex_bytes(e.get("tx_hash"), 32, f"{what}: tx_hash")[::-1]))
            self.history[sh] = entries

    def of_block(self, height: int, header80: bytes, outpoints36: Sequence[bytes], outputs32: Sequence[bytes]) -> list[Spend]:
        """The outpoints that a tx of block `height` spends, with its txid (each candidate proven in the block).

        Raises:
            ServerError: a request fails.
            SourceError: as `proven_txs`, or a malformed history.
        """
        hashes = [scripthash(key) for key in outputs32]
        self._read(sorted({sh for sh in hashes if sh not in self.history}))
        candidates = [(op, txid32) for op, sh in zip(outpoints36, hashes) for h, txid32 in self.history[sh] if h == height and txid32 != op[:32]]
        if not candidates:
            return []
        if len(candidates) > MAX_BLOCK_TXS:
            raise SourceError(f"the histories name {len(candidates):,} transactions of block {height}")
        proven = proven_txs(self.client, [(height, header80, t) for t in sorted({t for _, t in candidates})])
        spent = []
        for op, txid32 in candidates:
            if any(i.outpoint.to_bytes() == op for i in proven[txid32][1].inputs):
                spent.append(Spend(op, txid32))
        return spent

