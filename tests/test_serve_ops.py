"""`sp-scan serve`'s POST /forward-tx (relayed to the RPC stand-in) and the operator's view (/status, /metrics)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from bitcoin.core import CTransaction
from prometheus_client.parser import text_string_to_metric_families

import kernelchain
from serving import ServerThread, get, ok
from sp_scan.node import RpcNode

TIP = kernelchain.SAMPLE_TIP


def post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, object]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def raw_tx(kernel_chain) -> tuple[str, str]:
    """(raw hex, display txid) of a transaction of the sample chain."""
    tx = kernel_chain.active()[101].txs[0].tx
    return CTransaction.serialize(tx).hex(), tx.GetTxid()[::-1].hex()


@pytest.fixture(scope="module")
def node(kernel_chain):
    with kernelchain.rpc_server(kernel_chain, credentials="alice:pw") as server:
        yield server


def test_forward_tx_is_relayed_with_sendrawtransaction_and_answers_the_txid(kernel_index, node, raw_tx):
    tx_hex, txid = raw_tx
    relay = RpcNode(node.url, user="alice", password="pw")
    with ServerThread(kernel_index, relay=relay) as server:
        assert post(f"{server.url}/forward-tx", json.dumps({"data": tx_hex}).encode()) == (200, txid)
        assert post(f"{server.url}/forward-tx", f"data={tx_hex.upper()}".encode(), "application/x-www-form-urlencoded") == (200, txid)
        assert node.httpd.relayed == [tx_hex, tx_hex]
        status, body = post(f"{server.url}/forward-tx", json.dumps({"data": "00" * 60}).encode())
        assert status == 502 and "TX decode failed" in body["error"]  # the node's refusal, passed on
    assert node.httpd.relayed == [tx_hex, tx_hex]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"data": "zz"}', "not the hex"),
        (b'{"data": "abc"}', "not the hex"),
        (b'{"data": 5}', 'must be {"data"'),
        (b"{}", 'must be {"data"'),
        (b"{not json", "not JSON"),
        (b"", 'must be {"data"'),
        (json.dumps({"data": "00" * 200_001}).encode(), "over 400000 bytes"),
    ],
    ids=["non-hex", "odd", "number", "no-data", "bad-json", "empty", "over-400kB"],
)
def test_forward_tx_refuses_what_is_not_a_raw_transaction_with_400(kernel_index, node, body, message):
    with ServerThread(kernel_index, relay=RpcNode(node.url, user="alice", password="pw")) as server:
        before = len(node.httpd.relayed)
        status, answer = post(f"{server.url}/forward-tx", body)
        assert status == 400 and message in answer["error"]
        assert len(node.httpd.relayed) == before
        assert ok(f"{server.url}/block-height") == {"block_height": TIP}


def test_forward_tx_without_an_rpc_node_is_503_saying_to_use_your_node(kernel_index, raw_tx):
    with ServerThread(kernel_index) as server:
        status, body = post(f"{server.url}/forward-tx", json.dumps({"data": raw_tx[0]}).encode())
    assert status == 503 and "broadcast through your own node" in body["error"]


def test_serve_with_rest_only_answers_forward_tx_503(kernel_index, kernel_rest, raw_tx):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(kernel_index), "--port", "0", "--rest", kernel_rest.url],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = proc.stderr.readline().split()[2]
        status, body = post(f"{url}/forward-tx", json.dumps({"data": raw_tx[0]}).encode())
        assert status == 503 and "broadcast through your own node" in body["error"]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_status_and_metrics_on_loopback_tell_the_operator_what_is_going_on(kernel_index, node):
    relay = RpcNode(node.url, user="alice", password="pw")
    with ServerThread(kernel_index, relay=relay, node=relay, status_port=0, grpc_port=0) as server:
        status_url = server.server.urls["status"]
        assert status_url.startswith("http://127.0.0.1:")
        for _ in range(3):
            ok(f"{server.url}/tweak-index/101")
        get(f"{server.url}/tweak-index/999")
        doc = ok(f"{status_url}/status")
        assert doc["index"] == {"first_height": 0, "tip_height": TIP, "tip_hash": ok(f"{server.url}/block-hash/{TIP}")["block_hash"]}
        assert doc["network"] == "regtest" and doc["ec_engine"] and doc["version"]
        assert doc["node"]["tip_height"] in (None, TIP)  # polled in the background
        assert set(doc["connections"]) == {"http", "grpc"} and doc["requests"] >= 4
        assert doc["cache"]["entries"] >= 1 and 0 < doc["cache"]["hit_rate"] < 1
        metrics = urllib.request.urlopen(f"{status_url}/metrics", timeout=10).read().decode()
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    assert families["sp_scan_index_tip_height"].samples[0].value == TIP
    assert {s.labels["listener"] for s in families["sp_scan_open_connections"].samples} == {"http", "grpc"}
    requests = {s.labels["listener"]: s.value for s in families["sp_scan_requests"].samples if s.name == "sp_scan_requests_total"}
    assert requests["http"] >= 4
    hits = [s.value for s in families["sp_scan_cache_hits"].samples if s.name == "sp_scan_cache_hits_total"]
    assert hits and hits[0] >= 2
    assert families["sp_scan_info"].samples[0].labels["network"] == "regtest"


def test_the_status_listener_answers_only_its_two_paths(kernel_index):
    with ServerThread(kernel_index, status_port=0) as server:
        status_url = server.server.urls["status"]
        assert get(f"{status_url}/tweak-index/101")[0] == 404
        request = urllib.request.Request(f"{status_url}/status", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=10)
        assert err.value.code == 405 and err.value.headers["Allow"] == "GET, HEAD"


def test_forward_tx_with_expect_100_continue_gets_the_go_ahead_then_the_txid(kernel_index, node, raw_tx):
    """curl sends `Expect: 100-continue` before a body over 1 kB and waits for the server's go-ahead."""
    tx_hex, txid = raw_tx
    body = json.dumps({"data": tx_hex}).encode()
    with ServerThread(kernel_index, relay=RpcNode(node.url, user="alice", password="pw")) as server:
        host, port = server.url.rsplit("/", 1)[1].split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            head = f"POST /forward-tx HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
            sock.sendall(head.encode())
            assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(body)
            reply = b""
            while not reply.endswith(f'"{txid}"'.encode()):
                chunk = sock.recv(65536)
                assert chunk, reply
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
