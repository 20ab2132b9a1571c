"""`sp-scan psbt …`, `sp-scan descriptor show` and `scan --descriptor-file`: exit codes, output shape,
one-line errors naming the rule, and secrets never taken from arguments nor echoed."""

from __future__ import annotations

import base64
import json

import pytest
from click.testing import CliRunner
from coincurve import PrivateKey

import blockfactory as bf
import psbtfactory as pf
from cli_support import Chain, NodeServer, RestHandler
from conftest import ROOT
from sp_scan import cli, descriptor, psbt

CASES = json.loads((ROOT / "vectors" / "bip375" / "bip375_test_vectors.json").read_text())
WALLET = descriptor.from_keys(pf.RECEIVER_SCAN, pf.RECEIVER_SPEND, annotations=(("bh", 3), ("ml", 1)))
WALLET_TEXT = str(WALLET)


def invoke(*args: str, input: str | bytes | None = None):
    clean = {k: None for k in ("SP_SCAN_KEY", "SP_SCAN_SPEND_PUBKEY", "SP_SCAN_RPC_PASSWORD")}
    return CliRunner().invoke(cli.app, list(args), env=clean, input=input)


def assert_fails(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sp-scan: error: ") and "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def write(tmp_path, name: str, data: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
    return str(path)


# --- psbt verify ---


@pytest.mark.parametrize("form", ["base64", "binary", "stdin"])
def test_verify_reads_base64_binary_and_stdin(tmp_path, form):
    case = next(c for c in CASES["valid"] if c["description"] == "can finalize: one P2PKH input single-signer")
    if form == "stdin":
        result = invoke("psbt", "verify", "-", "--json", input=case["psbt"])
    else:
        data = case["psbt"] if form == "base64" else base64.b64decode(case["psbt"])
        result = invoke("psbt", "verify", write(tmp_path, "tx.psbt", data), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"sp_outputs": [0], "computed": [0], "ready": True}


def test_verify_says_how_far_an_in_progress_psbt_is(tmp_path):
    case = next(c for c in CASES["valid"] if c["description"].startswith("in progress: two inputs / one sp output"))
    result = invoke("psbt", "verify", write(tmp_path, "tx.psbt", case["psbt"]))
    assert result.exit_code == 0 and result.stdout == "ok: 1 silent-payment outputs, 0 with their script; awaiting ECDH shares\n"


@pytest.mark.parametrize("case", [c for c in CASES["invalid"] if "checks" not in c], ids=lambda c: c["description"])
def test_verify_exits_2_naming_the_rule_of_an_invalid_vector(tmp_path, case):
    assert_fails(invoke("psbt", "verify", write(tmp_path, "tx.psbt", case["psbt"])), case["description"].split(":")[0] + ": ")


def test_truncated_and_version_0_psbts_exit_2(tmp_path):
    data = base64.b64decode(CASES["valid"][1]["psbt"])
    assert_fails(invoke("psbt", "verify", write(tmp_path, "cut.psbt", data[:-3])), "psbt structure: ", "truncated")
    v0 = b"psbt\xff" + b"\x01\x00" + bytes([10]) + bytes.fromhex("02000000000000000000") + b"\x00"
    assert_fails(invoke("psbt", "verify", write(tmp_path, "v0.psbt", v0)), "PSBT version 0 is not supported")
    assert_fails(invoke("psbt", "verify", write(tmp_path, "junk.psbt", "hello")), "psbt structure: ")


def test_the_issues_hostile_psbt_and_running_out_of_memory_are_one_line_exit_2(tmp_path, monkeypatch):
    n = 2_000_000
    kv = lambda k, v: bytes([len(k)]) + k + bytes([len(v)]) + v  # noqa: E731  (the issue's reproduction, scaled down)
    g = kv(b"\x02", (2).to_bytes(4, "little")) + kv(b"\x04", b"\xfe" + n.to_bytes(4, "little")) + kv(b"\x05", b"\x00") + kv(b"\xfb", (2).to_bytes(4, "little")) + b"\x00"
    hostile = write(tmp_path, "em.psbt", b"psbt\xff" + g + bytes(n))
    assert_fails(invoke("psbt", "verify", hostile), "psbt structure: 2,000,000 inputs: more than a transaction can hold")

    def exhausted(data):
        raise MemoryError

    monkeypatch.setattr(psbt, "parse", exhausted)
    assert_fails(invoke("psbt", "verify", hostile), "out of memory")


# --- signing round trip through the CLI, found by `scan --descriptor-file` ---


def _block_paying(p: psbt.Psbt, coins: list[pf.Coin]) -> bf.TestBlock:
    """A block holding the PSBT's transaction with stand-in signatures (extraction does not check them)."""
    vin = []
    for c in coins:
        pub = PrivateKey(c.private_key32).public_key.format()
        witness = [bytes(71), pub] if c.kind == "p2wpkh" else [bytes(64)]
        serialized = bytes([len(witness)]) + b"".join(bytes([len(w)]) + w for w in witness)
        vin.append({"txid": c.outpoint.txid32[::-1].hex(), "vout": c.outpoint.vout, "scriptSig": "", "txinwitness": serialized.hex(),
                    "prevout": {"scriptPubKey": {"hex": c.prevout.script.hex()}}})  # fmt: skip
    outputs = [m[pf.key(psbt.fields.OUT_SCRIPT)][2:].hex() for m in p.outputs if m[pf.key(psbt.fields.OUT_SCRIPT)][:2] == b"\x51\x20"]
    return bf.build([{"given": {"vin": vin, "outputs": outputs}}])


def test_two_signers_through_the_cli_and_the_receiver_scans_by_descriptor(tmp_path):
    alice, bob = pf.coin("alice", "p2wpkh"), pf.coin("bob", "p2tr")
    start = pf.build([alice, bob], [pf.receiver_address(), b"\x00\x14" + bytes(20), pf.receiver_address(1)])
    unsigned = write(tmp_path, "unsigned.psbt", start.to_base64())
    alice_keys = write(tmp_path, "alice.keys", f"# alice\n0 {alice.private_key32.hex()}\n")
    bob_keys = write(tmp_path, "bob.keys", f"1 {bob.private_key32.hex()}\n")
    first = invoke("psbt", "add-shares", unsigned, "--key-file", alice_keys, "-o", str(tmp_path / "a.psbt"))
    assert first.exit_code == 0 and first.stdout == "", first.output
    assert "awaiting ECDH shares" in invoke("psbt", "verify", str(tmp_path / "a.psbt")).stdout
    second = invoke("psbt", "add-shares", "-", "--key-file", bob_keys, input=(tmp_path / "a.psbt").read_text())
    assert second.exit_code == 0, second.output
    assert alice.private_key32.hex() not in first.output + second.output and bob.private_key32.hex() not in second.output
    done = psbt.Psbt.from_base64(second.stdout)
    assert psbt.verify(done).computed == (0, 2)
    tb = _block_paying(done, [alice, bob])
    block_path = write(tmp_path, "block.hex", tb.raw.hex())
    write(tmp_path, "block.spent.hex", tb.spent_bytes.hex())
    wallet = write(tmp_path, "wallet.desc", WALLET_TEXT + "\n")
    found = invoke("scan", block_path, "--descriptor-file", wallet, "--json")
    assert found.exit_code == 0, found.output
    rows = [json.loads(line) for line in found.stdout.splitlines()]
    assert sorted((r["vout"], r["label"]) for r in rows) == [(1, None), (2, 1)]
    assert WALLET_TEXT not in found.output


def test_compute_outputs_fills_scripts_or_names_what_is_missing(tmp_path):
    alice, bob = pf.coin("alice"), pf.coin("bob")
    p = pf.build([alice, bob], [pf.receiver_address()])
    partial = psbt.add_shares(p, {0: alice.private_key32})
    assert_fails(invoke("psbt", "compute-outputs", write(tmp_path, "p.psbt", partial.to_base64())), "ecdh coverage: ", "eligible input 1 has no ECDH share")
    both = psbt.add_shares(partial, {1: bob.private_key32})
    without_scripts = psbt.Psbt(both.global_map, both.inputs, [{k: v for k, v in m.items() if k != pf.key(psbt.fields.OUT_SCRIPT)} for m in both.outputs])
    result = invoke("psbt", "compute-outputs", write(tmp_path, "q.psbt", without_scripts.to_base64()))
    assert result.exit_code == 0 and psbt.Psbt.from_base64(result.stdout) == both


def test_add_shares_refuses_an_input_that_is_not_eligible_and_keys_on_argv(tmp_path):
    carol = pf.p2sh_multisig_coin("carol")
    path = write(tmp_path, "p.psbt", pf.build([pf.coin("alice"), carol], [pf.receiver_address()]).to_base64())
    keys = write(tmp_path, "carol.keys", f"1 {carol.private_key32.hex()}\n")
    line = assert_fails(invoke("psbt", "add-shares", path, "--key-file", keys), "input eligibility: input 1 is not eligible")
    assert carol.private_key32.hex() not in line
    hexkey = carol.private_key32.hex()
    result = invoke("psbt", "add-shares", path, "--key-file", hexkey)
    assert_fails(result, "never from an argument")
    assert hexkey not in result.output
    bad = write(tmp_path, "bad.keys", f"one {hexkey}\n")
    assert hexkey not in assert_fails(invoke("psbt", "add-shares", path, "--key-file", bad), "line 1")
    assert_fails(invoke("psbt", "add-shares", "-", "--key-file", "-", input=""), "cannot both come from stdin")


def test_a_proof_for_the_wrong_key_exits_2(tmp_path):
    alice, mallory = pf.coin("alice"), pf.coin("mallory")
    good = psbt.add_shares(pf.build([alice, pf.coin("bob")], [pf.receiver_address()]), {0: alice.private_key32})
    forged = psbt.add_shares(pf.build([mallory, pf.coin("bob")], [pf.receiver_address()]), {0: mallory.private_key32})
    scan33 = pf.receiver_address().scan_pubkey33
    first = {**good.inputs[0], pf.key(psbt.fields.IN_SP_DLEQ, scan33): forged.inputs[0][pf.key(psbt.fields.IN_SP_DLEQ, scan33)]}
    bad = psbt.Psbt(good.global_map, [first, good.inputs[1]], good.outputs)
    assert_fails(invoke("psbt", "verify", write(tmp_path, "bad.psbt", bad.to_base64())), "ecdh coverage: input 0", "does not verify")


# --- descriptor show ---


def test_descriptor_show_prints_the_public_side_only(tmp_path):
    d = descriptor.from_keys(pf.RECEIVER_SCAN, pf.RECEIVER_SPEND, network="test", annotations=(("bh", 840000), ("ml", 4)))
    result = invoke("descriptor", "show", write(tmp_path, "w.desc", str(d)), "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert list(record) == ["network", "scan_pubkey", "spend_pubkey", "address", "birthday_height", "gap_limit", "max_labels"]
    assert record == {
        "network": "test", "scan_pubkey": d.scan_pubkey33.hex(), "spend_pubkey": d.spend_pubkey33.hex(),
        "address": d.address(), "birthday_height": 840000, "gap_limit": None, "max_labels": 4,
    }  # fmt: skip
    assert record["address"].startswith("tsp1")
    for secret in (pf.RECEIVER_SCAN.hex(), pf.RECEIVER_SPEND.hex(), str(d.scan)):
        assert secret not in result.output
    table = invoke("descriptor", "show", "-", input=WALLET_TEXT)
    assert table.exit_code == 0 and "gap_limit       -" in table.stdout and str(WALLET.scan) not in table.output


# --- descriptor create ---


def test_descriptor_create_from_key_files_writes_the_backup_the_other_commands_read(tmp_path):
    scan_file = write(tmp_path, "scan.key", pf.RECEIVER_SCAN.hex() + "\n")
    spend_file = write(tmp_path, "spend.key", pf.RECEIVER_SPEND.hex())
    out = tmp_path / "wallet.desc"
    args = ["--scan-key-file", scan_file, "--spend-key-file", spend_file, "--network", "main", "--birthday", "3", "--max-label", "1"]
    result = invoke("descriptor", "create", *args, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text() == WALLET_TEXT + "\n" and out.stat().st_mode & 0o777 == 0o600
    assert result.stdout == "" and WALLET.address() in result.stderr
    for secret in (pf.RECEIVER_SCAN.hex(), pf.RECEIVER_SPEND.hex(), str(WALLET.scan)):
        assert secret not in result.output
    assert json.loads(invoke("descriptor", "show", str(out), "--json").stdout)["address"] == WALLET.address()
    alice, bob = pf.coin("alice", "p2wpkh"), pf.coin("bob", "p2tr")
    signed = psbt.add_shares(pf.build([alice, bob], [pf.receiver_address(), pf.receiver_address(1)]), {0: alice.private_key32, 1: bob.private_key32})
    tb = _block_paying(signed, [alice, bob])
    block_path = write(tmp_path, "block.hex", tb.raw.hex())
    write(tmp_path, "block.spent.hex", tb.spent_bytes.hex())
    found = invoke("scan", block_path, "--descriptor-file", str(out), "--json")
    assert sorted((r["vout"], r["label"]) for r in map(json.loads, found.stdout.splitlines())) == [(1, None), (2, 1)]
    assert_fails(invoke("descriptor", "create", *args, "--out", str(out)), "wallet.desc", "exists")  # never overwritten
    watch = invoke("descriptor", "create", "--scan-key-file", "-", "--spend-pubkey", WALLET.spend_pubkey33.hex(), "--network", "signet", "-o", "-", input=pf.RECEIVER_SCAN.hex())
    assert watch.exit_code == 0, watch.output
    watching = descriptor.decode(watch.stdout)
    assert (watching.network, watching.spend_key32, watching.scan_key32) == ("test", None, pf.RECEIVER_SCAN)
    assert f"the sp() descriptor of {watching.address()}" in watch.stderr and watching.address().startswith("tsp1")
    regtest = invoke("descriptor", "create", "--scan-key-file", "-", "--spend-pubkey", WALLET.spend_pubkey33.hex(), "--network", "regtest", "-o", "-", input=pf.RECEIVER_SCAN.hex())
    assert regtest.exit_code == 0 and regtest.stdout == watch.stdout  # tspscan: BIP392 names the test networks alike
    assert f"the sp() descriptor of sprt1{watching.address()[4:-6]}" in regtest.stderr  # the same keys, regtest's prefix


def test_descriptor_create_from_an_xprv_file_derives_bip352s_paths(tmp_path):
    from test_descriptor import BIP32_MASTER

    xprv = write(tmp_path, "master.xprv", BIP32_MASTER + "\n")
    result = invoke("descriptor", "create", "--xprv-file", xprv, "--account", "2", "--birthday", "900000", "--gap-limit", "5", "-o", "-")
    assert result.exit_code == 0, result.output
    expected = descriptor.from_master(BIP32_MASTER, account=2, annotations=(("bh", 900000), ("gl", 5)))
    assert result.stdout == str(expected) + "\n" and BIP32_MASTER not in result.stderr
    watch = invoke("descriptor", "create", "--xprv-file", xprv, "--watch-only", "-o", "-")
    assert descriptor.decode(watch.stdout).spend_key32 is None
    assert_fails(invoke("descriptor", "create", "--xprv-file", xprv, "--network", "signet", "-o", "-"), "is for mainnet")


def test_descriptor_create_takes_secrets_from_files_only_and_checks_its_options(tmp_path):
    key = write(tmp_path, "k", pf.RECEIVER_SCAN.hex())
    hexkey = pf.RECEIVER_SPEND.hex()
    for args, needle in (
        (["--scan-key-file", hexkey, "--spend-pubkey", WALLET.spend_pubkey33.hex(), "--network", "main"], "looks like a key"),
        (["--scan-key-file", key, "--spend-key-file", hexkey, "--network", "main"], "looks like a key"),
        (["--xprv-file", "xprv9s21ZrQH143K" + "a" * 95], "looks like a key"),
        (["--scan-key-file", key, "--spend-key-file", key], "give --network"),
        (["--scan-key-file", key], "--spend-key-file or --spend-pubkey"),
        (["--scan-key-file", key, "--spend-key-file", key, "--spend-pubkey", WALLET.spend_pubkey33.hex(), "--network", "main"], "--spend-key-file or --spend-pubkey"),
        (["--scan-key-file", key, "--xprv-file", key], "not both"),
        (["--scan-key-file", "-", "--spend-key-file", "-", "--network", "main"], "only one of the key files"),
        (["--scan-key-file", key, "--spend-pubkey", "02" + "ff" * 32, "--network", "main"], "--spend-pubkey is not a valid"),
        (["--scan-key-file", write(tmp_path, "z", "00" * 32), "--spend-key-file", key, "--network", "main"], "the scan key is not a valid secret key"),
        (["--scan-key-file", key, "--spend-key-file", key, "--network", "main", "--watch-only"], "--xprv-file"),
    ):
        result = invoke("descriptor", "create", *args, "-o", "-")
        assert_fails(result, needle)
        assert hexkey not in result.output and result.stdout == ""


def test_a_descriptor_on_argv_is_refused_and_never_echoed(tmp_path):
    block = write(tmp_path, "b.hex", "00")
    for args in (
        ["descriptor", "show", WALLET_TEXT],
        ["scan", block, "--descriptor-file", WALLET_TEXT],
        ["scan", WALLET_TEXT, "--descriptor-file", write(tmp_path, "w.desc", WALLET_TEXT)],
        ["descriptor", "show", str(WALLET.scan)],
    ):
        result = invoke(*args)
        assert_fails(result)
        assert str(WALLET.scan) not in result.output and WALLET_TEXT not in result.output


def test_bad_descriptors_exit_2_with_one_line(tmp_path):
    wrong = WALLET_TEXT[:-1] + ("q" if WALLET_TEXT[-1] != "q" else "p")
    assert_fails(invoke("descriptor", "show", write(tmp_path, "a.desc", wrong)), "wrong descriptor checksum")
    uncompressed = "sp(5KYZdUEo39z3FPrtuX2QbbwGnNP5zTd7yyr2SC1j299sBCnWjss,0260b2003c386519fc9eadf2b5cf124dd8eea4c4e68d5e154050a9346ea98ce600)"
    assert_fails(invoke("descriptor", "show", write(tmp_path, "b.desc", uncompressed)), "uncompressed keys are not allowed")
    assert_fails(invoke("scan", write(tmp_path, "x.hex", "00"), "--descriptor-file", write(tmp_path, "c.desc", wrong)), "checksum")


def test_descriptor_file_excludes_the_key_options(tmp_path):
    wallet = write(tmp_path, "w.desc", WALLET_TEXT)
    assert_fails(invoke("scan", write(tmp_path, "b.hex", "00"), "--descriptor-file", wallet, "--label", "2"), "not both")


def test_a_node_range_starts_at_the_birthday_height(tmp_path):
    wallet = write(tmp_path, "w.desc", WALLET_TEXT)
    with NodeServer(RestHandler, Chain(length=6, per_block=1)) as node:
        result = invoke("scan", "--rest", node.url, "--to", "4", "--descriptor-file", wallet, "--json")
        heights = sorted({int(p.split("/")[-1].split(".")[0]) for p in node.requests if "blockhashbyheight" in p})
    assert result.exit_code == 0, result.output
    assert heights == [3, 4]
