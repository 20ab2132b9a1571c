"""BlindBit Oracle v2 (gRPC) of `sp-scan serve --grpc-port`, through a real gRPC client on 127.0.0.1.

Streams and GetFullBlock are checked against values computed here from the kernel chain's blocks
and spent outputs (eligible txs and tweaks from the sender's records, keys and outpoints from the
block's own transactions), and against the v1 answers of the same server.
"""

from __future__ import annotations

import sqlite3

import grpc
import pytest
from bitcoin.core import CBlock
from google.protobuf import empty_pb2

import kernelchain
from index_support import as_format3, as_old_version
from serving import ServerThread, ok
from sp_scan.index import Index
from sp_scan.node import RestNode
from sp_scan.proto import blindbit_oracle_pb2 as pb
from sp_scan.wire import parse_spent

TIP = kernelchain.SAMPLE_TIP
SERVICE = "/blindbit.oracle.v1.OracleService/"
P2TR = b"\x51\x20"


class Oracle:
    """A gRPC client of the OracleService (the calls by name, as any generated stub makes them)."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)])

    def unary(self, name: str, request, reply):
        call = self.channel.unary_unary(SERVICE + name, request_serializer=type(request).SerializeToString, response_deserializer=reply.FromString)
        return call(request, timeout=30)

    def stream(self, name: str, request, reply):
        call = self.channel.unary_stream(SERVICE + name, request_serializer=type(request).SerializeToString, response_deserializer=reply.FromString)
        return call(request, timeout=60)

    def close(self) -> None:
        self.channel.close()


@pytest.fixture(scope="module")
def served(kernel_index):
    with ServerThread(kernel_index, grpc_port=0) as server:
        oracle = Oracle(server.server.urls["grpc"])
        yield server.url, oracle
        oracle.close()


def display(hash32: bytes) -> str:
    return hash32[::-1].hex()


def eligible(chain, height: int, dust: int = 0, cut: bool = False) -> list:
    """The sender's records of the block's txs that have a tweak and pass dust/cut-through per tx."""
    kept = {t.hex() for t in (x.tweak33 for x in chain.tweaks(height, dust_limit=dust, cut_through=cut))}
    return [t for t in chain.active()[height].txs if t.tweak33 is not None and t.tweak33.hex() in kept]


def expected_items(chain, height: int, dust: int = 0, cut: bool = False) -> list[tuple[bytes, bytes, bytes]]:
    """(display txid, tweak, 8-byte prefixes of the tx's P2TR output keys in vout order), sorted by internal txid."""
    rows = []
    for t in eligible(chain, height, dust, cut):
        keys = b"".join(bytes(o.scriptPubKey)[2:10] for o in t.tx.vout if bytes(o.scriptPubKey)[:2] == P2TR and len(bytes(o.scriptPubKey)) == 34)
        rows.append((t.txid32, t.tweak33, keys))
    return [(txid32[::-1], tweak, keys) for txid32, tweak, keys in sorted(rows)]


def spent_prefixes(chain, height: int) -> bytes:
    """The 8-byte key prefix of every P2TR output the block spends, tx then vin order, from the chain's spent data."""
    spent = parse_spent(chain.spent(height))
    return b"".join(o.script[2:10] for tx in spent for o in tx if len(o.script) == 34 and o.script[:2] == P2TR)


def items(message) -> list[tuple[bytes, bytes, bytes]]:
    return [(i.txid, i.tweak, i.outputs_short) for i in (message.comp_index if hasattr(message, "comp_index") else message.index)]


def test_info_height_and_hashes_are_the_chains(served, kernel_chain):
    url, oracle = served
    info = oracle.unary("GetInfo", empty_pb2.Empty(), pb.InfoResponse)
    assert (info.network, info.height, info.tweaks_only) == ("regtest", TIP, False)
    assert info.tweaks_full_basic and info.tweaks_full_with_dust_filter and info.tweaks_cut_through_with_dust_filter
    assert oracle.unary("GetBestBlockHeight", empty_pb2.Empty(), pb.BlockHeightResponse).block_height == ok(f"{url}/block-height")["block_height"]
    for h in (0, 50, 101, TIP):
        got = oracle.unary("GetBlockHashByHeight", pb.BlockHeightRequest(block_height=h), pb.BlockHashResponse).block_hash
        assert got == kernel_chain.hash_at(h)[::-1]
        assert got.hex() == ok(f"{url}/block-hash/{h}")["block_hash"]


def test_stream_compute_index_is_every_eligible_tx_sorted_by_internal_txid(served, kernel_chain):
    url, oracle = served
    messages = list(oracle.stream("StreamComputeIndex", pb.RangedBlockHeightRequestFiltered(start=0, end=TIP), pb.ComputeIndexResponse))
    assert [m.block_identifier.block_height for m in messages] == list(range(TIP + 1))
    nonempty = 0
    for h, message in enumerate(messages):
        assert message.block_identifier.block_hash == kernel_chain.hash_at(h)[::-1]
        assert items(message) == expected_items(kernel_chain, h)
        assert sorted(i.tweak.hex() for i in message.index) == sorted(ok(f"{url}/tweak-index/{h}"))
        nonempty += bool(message.index)
    assert nonempty >= 8


def test_stream_block_scan_data_adds_the_spent_outputs_prefixes(served, kernel_chain):
    url, oracle = served
    request = pb.RangedBlockHeightRequestFiltered(start=95, end=TIP)
    spending = 0
    for message in oracle.stream("StreamBlockScanDataShort", request, pb.BlockScanDataShortResponse):
        h = message.block_identifier.block_height
        assert items(message) == expected_items(kernel_chain, h)
        assert message.spent_outputs == spent_prefixes(kernel_chain, h)
        assert len(message.spent_outputs) // 8 == len(ok(f"{url}/spent-index/{h}")["data"])  # one per spent P2TR output
        single = oracle.unary("GetSpentOutputsShort", pb.BlockHeightRequest(block_height=h), pb.IndexResponse)
        assert (single.block_identifier.block_height, single.index) == (h, message.spent_outputs)
        spending += bool(message.spent_outputs)
    assert spending >= 5


@pytest.mark.parametrize("cut", [False, True], ids=["full", "cut-through"])
def test_dust_and_cut_through_keep_or_drop_whole_txs_as_v1_does(served, kernel_chain, cut):
    url, oracle = served
    limits = sorted({max(t.tx.vout[n].nValue for n in t.taproot_vouts) for b in kernel_chain.active() for t in b.txs if t.tweak33 is not None})
    dropped = 0
    for dust in (0, limits[len(limits) // 2], limits[-1], limits[-1] + 1):
        request = pb.RangedBlockHeightRequestFiltered(start=100, end=TIP, dustlimit=dust, cut_through=cut)
        for message in oracle.stream("StreamComputeIndex", request, pb.ComputeIndexResponse):
            h = message.block_identifier.block_height
            assert items(message) == expected_items(kernel_chain, h, dust, cut)
            assert sorted(i.tweak.hex() for i in message.index) == sorted(ok(f"{url}/{'tweaks' if cut else 'tweak-index'}/{h}?dustLimit={dust}"))
            dropped += len(eligible(kernel_chain, h)) - len(message.index)
    assert dropped > 0


def test_bad_ranges_and_unkept_data_get_grpc_statuses(served):
    _, oracle = served
    cases = [
        ("StreamComputeIndex", pb.RangedBlockHeightRequestFiltered(start=5, end=4), grpc.StatusCode.INVALID_ARGUMENT),
        ("StreamComputeIndex", pb.RangedBlockHeightRequestFiltered(start=100, end=TIP + 1), grpc.StatusCode.NOT_FOUND),
        ("StreamBlockScanDataShort", pb.RangedBlockHeightRequestFiltered(start=2**40, end=2**40), grpc.StatusCode.NOT_FOUND),
    ]
    for name, request, code in cases:
        with pytest.raises(grpc.RpcError) as err:
            list(oracle.stream(name, request, pb.ComputeIndexResponse))
        assert err.value.code() == code, name
    with pytest.raises(grpc.RpcError) as err:
        oracle.unary("GetBlockHashByHeight", pb.BlockHeightRequest(block_height=TIP + 1), pb.BlockHashResponse)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        oracle.unary("GetFullBlock", pb.BlockHeightRequest(block_height=101), pb.FullBlockResponse)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "needs the server's node" in err.value.details()


def test_a_cancelled_stream_ends_and_the_server_serves_on(served):
    _, oracle = served
    stream = oracle.stream("StreamBlockScanDataShort", pb.RangedBlockHeightRequestFiltered(start=0, end=TIP), pb.BlockScanDataShortResponse)
    first = next(stream)
    assert first.block_identifier.block_height == 0
    stream.cancel()
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() == grpc.StatusCode.CANCELLED
    assert oracle.unary("GetBestBlockHeight", empty_pb2.Empty(), pb.BlockHeightResponse).block_height == TIP


def test_an_index_from_before_the_spent_keys_serves_the_compute_index_and_says_what_is_missing(kernel_index, tmp_path):
    """An index written before the spent_keys table existed (format 2 without it), upgraded: serving works, and
    StreamBlockScanDataShort says those blocks were stored without their spent keys."""
    old = tmp_path / "old.db"
    with sqlite3.connect(kernel_index) as source, sqlite3.connect(old) as copy:
        source.backup(copy)
    as_format3(old)
    as_old_version(old)
    with sqlite3.connect(old) as conn:
        conn.execute("DROP TABLE spent_keys")
    Index.open(old).close()  # a writer upgrades it
    with ServerThread(old, grpc_port=0) as server:
        oracle = Oracle(server.server.urls["grpc"])
        request = pb.RangedBlockHeightRequestFiltered(start=100, end=101)
        assert len(list(oracle.stream("StreamComputeIndex", request, pb.ComputeIndexResponse))) == 2
        with pytest.raises(grpc.RpcError) as err:
            list(oracle.stream("StreamBlockScanDataShort", request, pb.BlockScanDataShortResponse))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "stored without its spent keys" in err.value.details()
        oracle.close()


def expected_full_block(chain, height: int) -> list[tuple]:
    """(display txid, tweak, P2TR-spending outpoints as display txid ‖ vout BE32, [(vout, amount, key)]) per eligible
    tx, sorted by internal txid, from the chain's block and spent outputs."""
    block = CBlock.deserialize(chain.block(height))
    spent = parse_spent(chain.spent(height))
    inputs = {
        tx.GetTxid(): b"".join(i.prevout.hash[::-1] + i.prevout.n.to_bytes(4, "big") for i, o in zip(tx.vin, outs) if o.script[:2] == P2TR and len(o.script) == 34)
        for tx, outs in zip(block.vtx[1:], spent[1:])
    }
    rows = []
    for t in eligible(chain, height):
        outs = [(n, o.nValue, bytes(o.scriptPubKey)[2:]) for n, o in enumerate(t.tx.vout) if bytes(o.scriptPubKey)[:2] == P2TR and len(bytes(o.scriptPubKey)) == 34]
        rows.append((t.txid32, t.tweak33, inputs[t.txid32], outs))
    return [(txid32[::-1], tweak, ins, outs) for txid32, tweak, ins, outs in sorted(rows)]


def test_get_full_block_lists_each_eligible_txs_outputs_and_the_taproot_outpoints_it_spends(kernel_index, kernel_rest, kernel_chain):
    with ServerThread(kernel_index, grpc_port=0, node=RestNode(kernel_rest.url)) as server:
        oracle = Oracle(server.server.urls["grpc"])
        with_inputs = 0
        for h in range(95, TIP + 1):
            message = oracle.unary("GetFullBlock", pb.BlockHeightRequest(block_height=h), pb.FullBlockResponse)
            assert (message.block_identifier.block_hash, message.block_identifier.block_height) == (kernel_chain.hash_at(h)[::-1], h)
            got = [(i.txid, i.tweak, i.inputs, [(u.vout, u.amount, u.pubkey) for u in i.utxos]) for i in message.index]
            assert got == expected_full_block(kernel_chain, h)
            with_inputs += sum(bool(i.inputs) for i in message.index)
        oracle.close()
    assert with_inputs >= 3
