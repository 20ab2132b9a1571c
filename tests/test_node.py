"""Node clients against local servers that answer as Core's REST and JSON-RPC do."""

from __future__ import annotations

import hashlib
import pickle

import pytest

from cli_support import Chain, NodeServer, RestHandler, RpcHandler, closed_port_url, node_fixtures
from node_mempool import NodeMempool
from sp_scan import formats
from sp_scan.errors import ServerConfigError, ServerError
from sp_scan.node import PIPELINE, REST_THREADS, RestNode, RpcNode

CHAIN = Chain(length=3, per_block=3)
PASSWORD = "s3cret-pass"
rest, rpc = node_fixtures(CHAIN, f"alice:{PASSWORD}")


def test_rest_gives_tip_hash_block_and_spent_outputs(rest):
    node = RestNode(rest.url + "/")
    assert node.tip_height() == 2
    for h, tb in enumerate(CHAIN.blocks):
        assert node.block_hash(h) == tb.hash_hex
        assert node.block(tb.hash_hex) == (tb.raw, tb.spent_bytes)
    assert f"/rest/spenttxouts/{CHAIN.blocks[0].hash_hex}.bin" in rest.requests


def test_both_clients_name_the_nodes_chain(rest, rpc):
    assert RestNode(rest.url).chain() == "regtest"
    assert RpcNode(rpc.url, user="alice", password=PASSWORD).chain() == "regtest"


def test_rest_errors_carry_the_status_and_core_text(rest):
    with pytest.raises(ServerError, match="HTTP 404 Block height out of range"):
        RestNode(rest.url).block_hash(99)
    with pytest.raises(ServerError, match="HTTP 404 " + "00" * 32 + " not found"):
        RestNode(rest.url).block("00" * 32)


@pytest.mark.parametrize("handler", [RestHandler, RpcHandler])
def test_a_pruned_block_gets_its_own_hint_not_the_rest_one(handler):
    with NodeServer(handler, CHAIN, credentials=f"alice:{PASSWORD}", pruned_below=1) as server:
        node = RestNode(server.url) if handler is RestHandler else RpcNode(server.url, user="alice", password=PASSWORD)
        with pytest.raises(ServerError, match="not available \\(pruned data\\) \\(the node has pruned this block") as info:
            node.block(CHAIN.blocks[0].hash_hex)
        assert "-rest" not in str(info.value) and "Core 30" not in str(info.value)
        assert node.block(CHAIN.blocks[1].hash_hex) == (CHAIN.blocks[1].raw, CHAIN.blocks[1].spent_bytes)


def test_another_rest_404_keeps_the_rest_hint(rest):
    with pytest.raises(ServerError, match="not found \\(is the node started with -rest\\? spenttxouts needs Core 30\\+\\)"):
        RestNode(rest.url).block("00" * 32)


def test_unreachable_nodes_raise_node_error():
    with pytest.raises(ServerError, match="cannot reach the node"):
        RestNode(closed_port_url()).tip_height()
    with pytest.raises(ServerError, match="cannot reach the node"):
        RpcNode(closed_port_url(), user="u", password="p").tip_height()


@pytest.mark.parametrize("url", ["ftp://host", "127.0.0.1:8332", "http://"])
def test_a_url_that_is_not_http_is_refused(url):
    with pytest.raises(ServerError, match="http://host:port"):
        RestNode(url)


def test_rpc_with_user_and_password(rpc):
    node = RpcNode(rpc.url, user="alice", password=PASSWORD)
    assert node.tip_height() == 2
    tb = CHAIN.blocks[1]
    assert node.block_hash(1) == tb.hash_hex
    assert node.block(tb.hash_hex) == (tb.raw, tb.spent_bytes)


def test_rpc_with_a_cookie_file(rpc, tmp_path):
    cookie = tmp_path / ".cookie"
    cookie.write_text(f"alice:{PASSWORD}")
    assert RpcNode(rpc.url, cookie_file=str(cookie)).block_hash(0) == CHAIN.blocks[0].hash_hex


def test_a_cookie_file_never_read_is_a_config_error_and_one_gone_after_a_read_is_a_node_restarting(rpc, tmp_path):
    cookie = tmp_path / ".cookie"
    node = RpcNode(rpc.url, cookie_file=str(cookie))
    with pytest.raises(ServerConfigError, match=f"cannot read the RPC cookie file {cookie}: No such file"):
        node.tip_height()
    cookie.write_text("no colon")
    with pytest.raises(ServerConfigError, match="is not user:password"):
        node.tip_height()
    cookie.write_text(f"alice:{PASSWORD}")
    assert node.tip_height() == 2
    cookie.unlink()  # Core deletes it when it stops, and writes a new one when it starts
    with pytest.raises(ServerError) as info:
        node.tip_height()
    assert type(info.value) is ServerError and "cannot read the RPC cookie file" in str(info.value)
    cookie.write_text(f"alice:{PASSWORD}")
    assert node.tip_height() == 2


def test_rpc_with_credentials_in_the_url(rpc):
    node = RpcNode(rpc.url.replace("http://", f"http://alice:{PASSWORD}@"))
    assert node.tip_height() == 2
    assert PASSWORD not in repr(node) and PASSWORD not in node.url


def test_rpc_bad_credentials_fail_without_echoing_them(rpc, tmp_path):
    with pytest.raises(ServerError, match="authentication failed") as info:
        RpcNode(rpc.url, user="alice", password="wrong-one").tip_height()
    assert "wrong-one" not in str(info.value)
    with pytest.raises(ServerError, match="authentication failed"):
        RpcNode(rpc.url).tip_height()
    with pytest.raises(ServerError, match="cookie file"):
        RpcNode(rpc.url, cookie_file=str(tmp_path / "missing")).tip_height()


def test_rpc_error_replies_become_node_errors(rpc):
    node = RpcNode(rpc.url, user="alice", password=PASSWORD)
    with pytest.raises(ServerError, match="RPC getblockhash: Block height out of range"):
        node.block_hash(7)
    with pytest.raises(ServerError, match="RPC getblock: Block not found"):
        node.block("11" * 32)
    with pytest.raises(ServerError, match="Method not found"):
        node.call("nosuchmethod")


def test_rpc_amounts_stay_exact(rpc):
    node = RpcNode(rpc.url, user="alice", password=PASSWORD)
    obj = node.call("getblock", CHAIN.blocks[2].hash_hex, 3)
    assert formats.spent_from_getblock(obj) == CHAIN.blocks[2].spent_bytes


def test_a_hash_argument_must_be_32_bytes_of_hex(rest):
    with pytest.raises(ServerError, match="block hash"):
        RestNode(rest.url).block("zz")
    with pytest.raises(ServerError, match="32-byte"):
        RestNode(rest.url).block("00" * 31)


def test_clients_pickle_for_worker_processes(rpc):
    node = pickle.loads(pickle.dumps(RpcNode(rpc.url, user="alice", password=PASSWORD)))
    assert node.tip_height() == 2


class ClosingRestHandler(RestHandler):
    """A REST stand-in that ends every 7th reply with Connection: close (a server at its keep-alive limit)
    and notes each connection's port."""

    def do_GET(self) -> None:  # noqa: N802
        with self.server.lock:
            self.server.ports.add(self.client_address[1])
        super().do_GET()

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        with self.server.lock:
            self.server.replies += 1
            closing = self.server.replies % 7 == 0
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if closing:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _mempool_tx(n: int) -> bytes:
    """A one-input, one-output tx spending an outpoint no chain has (the stand-in takes it unchecked)."""
    outpoint = hashlib.sha256(b"outpoint %d" % n).digest() + b"\x00" * 4
    return b"\x02\x00\x00\x00\x01" + outpoint + b"\x00\xff\xff\xff\xff\x01" + (1000 + n).to_bytes(8, "little") + b"\x16\x00\x14" + bytes(20) + bytes(4)


def test_rest_mempool_calls_are_pipelined_answered_in_order_and_sent_again_when_a_connection_closes():
    pool = NodeMempool(CHAIN)
    txids = [pool.accept(_mempool_tx(n), check=False) for n in range(10 * PIPELINE)]
    with NodeServer(ClosingRestHandler, CHAIN, mempool=pool) as server:
        server.httpd.ports, server.httpd.replies = set(), 0
        node = RestNode(server.url)
        unknown = hashlib.sha256(b"not in the mempool").digest()
        assert node.transactions([*txids, unknown]) == {t: pool.raw(t) for t in txids}
        assert node.mempool_txids() == txids
        outpoints = [t + vout.to_bytes(4, "little") for t in txids for vout in range(3)]  # paths of ~1 KB: windows end at PIPELINE_BYTES
        assert node.utxos(outpoints) == [None] * len(outpoints)
    replies = len(txids) + 2 + len(outpoints) // 15  # the txs, the unknown one, the listing, getutxos of 15
    assert server.httpd.replies == replies
    assert len(server.httpd.ports) <= REST_THREADS + 1 + replies // 7  # kept connections, one more after each close
