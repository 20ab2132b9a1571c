"""The sp-scan command line: every command, exit codes, JSON Lines shape, one-line errors."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from coincurve import PrivateKey

import blockfactory as bf
from cli_support import ROOT, Chain, NodeServer, RestHandler, closed_port_url, node_fixtures
from sp_scan import address, cli, descriptor
from sp_scan.cli.run import Progress

CASES = bf.wallet_cases()
TB = bf.build(CASES)
KM = CASES[0]["given"]["key_material"]
SCAN_HEX = KM["scan_priv_key"]
SPEND_PUB = PrivateKey(bytes.fromhex(KM["spend_priv_key"])).public_key.format().hex()
TWEAK_KEYS = ["txid", "tweak"]
FOUND_KEYS = ["txid", "vout", "amount", "output", "tweak", "label"]
PASSWORD = "rpc-pass-123"


def expected_tweaks(tb: bf.TestBlock) -> list[dict]:
    return [{"txid": tx.GetTxid()[::-1].hex(), "tweak": c["expected"]["tweak"]} for tx, c in zip(tb.txs[1:], tb.cases) if c["expected"]["tweak"]]


def expected_found(tb: bf.TestBlock) -> set[tuple]:
    out = set()
    for tx, c in zip(tb.txs[1:], tb.cases):
        for o in c["expected"]["outputs"]:
            vout = 1 + c["given"]["outputs"].index(o["pub_key"])
            out.add((tx.GetTxid()[::-1].hex(), vout, o["pub_key"], o["priv_key_tweak"]))
    return out


def invoke(*args: str, env: dict | None = None, input: str | None = None):
    clean = {k: None for k in ("SP_SCAN_KEY", "SP_SCAN_SPEND_PUBKEY", "SP_SCAN_RPC_PASSWORD")}
    return CliRunner().invoke(cli.app, list(args), env={**clean, **(env or {})}, input=input)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def assert_fails(result, *needles: str) -> str:
    """Exit 2, exactly one line on stderr, no traceback, stdout still valid JSON Lines or a table."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sp-scan: error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def write_block(tmp_path: Path, tb: bf.TestBlock = TB, name: str = "block", spent_fmt: str | None = "hex", block_fmt: str = "hex") -> Path:
    path = tmp_path / f"{name}.{block_fmt}"
    path.write_bytes(tb.raw.hex().encode() + b"\n" if block_fmt == "hex" else tb.raw)
    if spent_fmt is not None:
        spent = tb.spent_bytes.hex().encode() + b"\n" if spent_fmt == "hex" else tb.spent_bytes
        (tmp_path / f"{name}.spent.{spent_fmt}").write_bytes(spent)
    return path


def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "wallet.scan"
    path.write_text(SCAN_HEX + "\n")
    return path


# --- tweaks ---


@pytest.mark.parametrize(("block_fmt", "spent_fmt"), [("hex", "hex"), ("bin", "bin"), ("hex", "bin"), ("bin", "hex")])
def test_tweaks_reads_the_spent_file_beside_the_block(tmp_path, block_fmt, spent_fmt):
    path = write_block(tmp_path, spent_fmt=spent_fmt, block_fmt=block_fmt)
    result = invoke("tweaks", str(path), "--json")
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert rows == expected_tweaks(TB)
    assert all(list(r) == TWEAK_KEYS for r in rows)


@pytest.mark.parametrize("form", ["bin", "hex", "spenttxouts-json", "getblock3-json"])
def test_spent_option_detects_each_format(tmp_path, form):
    path = write_block(tmp_path, spent_fmt=None)
    data = {
        "bin": TB.spent_bytes,
        "hex": TB.spent_bytes.hex().encode(),
        "spenttxouts-json": bf.spenttxouts_json(TB.spent).encode(),
        "getblock3-json": bf.dumps(bf.getblock3(TB)).encode(),
    }[form]
    spent = tmp_path / "prevouts.data"
    spent.write_bytes(data)
    result = invoke("tweaks", str(path), "--spent", str(spent), "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == expected_tweaks(TB)


def test_a_getblock3_json_file_is_a_block_with_its_prevouts(tmp_path):
    path = tmp_path / "block.json"
    path.write_text(bf.dumps(bf.getblock3(TB)))
    result = invoke("tweaks", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == expected_tweaks(TB)


def test_tweaks_table_has_a_header_and_one_row_per_tx(tmp_path):
    result = invoke("tweaks", str(write_block(tmp_path)))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TXID", "TWEAK"]
    assert [line.split() for line in lines[1:]] == [[r["txid"], r["tweak"]] for r in expected_tweaks(TB)]


def test_several_blocks_print_in_argument_order(tmp_path):
    other = bf.build(bf.receiving_cases()[:4], height=2)
    first, second = write_block(tmp_path, TB, "a"), write_block(tmp_path, other, "b")
    result = invoke("tweaks", str(second), str(first), "--json", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == expected_tweaks(other) + expected_tweaks(TB)


# --- scan and keys ---


def _found_set(rows: list[dict]) -> set[tuple]:
    return {(r["txid"], r["vout"], r["output"], r["tweak"]) for r in rows}


def test_scan_with_a_key_file_finds_the_vector_outputs(tmp_path):
    result = invoke("scan", str(write_block(tmp_path)), "--scan-key-file", str(key_file(tmp_path)), "--spend-pubkey", SPEND_PUB, "--json")
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert all(list(r) == FOUND_KEYS for r in rows)
    assert _found_set(rows) == expected_found(TB)
    assert all(r["label"] is None or isinstance(r["label"], int) for r in rows)
    assert all(r["amount"] == bf.amount(CASES.index(next(c for tx, c in zip(TB.txs[1:], CASES) if tx.GetTxid()[::-1].hex() == r["txid"])), r["vout"]) for r in rows)


def test_scan_reports_labels_as_integers(tmp_path):
    labelled = [r for r in bf.receiving_cases() if r["given"]["labels"] and r["given"]["key_material"] == KM]
    tb = bf.build(labelled[:3])
    labels = [str(m) for m in labelled[0]["given"]["labels"]]
    args = ["scan", str(write_block(tmp_path, tb)), "--scan-key-file", str(key_file(tmp_path)), "--spend-pubkey", SPEND_PUB, "--json"]
    result = invoke(*args, *sum((["--label", m] for m in labels), []))
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert {r["label"] for r in rows} <= {None, *map(int, labels)} and any(isinstance(r["label"], int) for r in rows)


@pytest.mark.parametrize("source", ["file", "dash-file", "env", "stdin"])
def test_the_scan_key_comes_from_a_file_stdin_or_the_environment(tmp_path, source):
    args = ["scan", str(write_block(tmp_path)), "--spend-pubkey", SPEND_PUB, "--json"]
    env, stdin = {}, None
    if source == "file":
        args += ["--scan-key-file", str(key_file(tmp_path))]
    elif source == "dash-file":
        args += ["--scan-key-file", "-"]
        stdin = SCAN_HEX + "\n"
    elif source == "env":
        env["SP_SCAN_KEY"] = SCAN_HEX
    else:
        stdin = SCAN_HEX + "\n"
    result = invoke(*args, env=env, input=stdin)
    assert result.exit_code == 0, result.output
    assert _found_set(json_lines(result.stdout)) == expected_found(TB)
    assert SCAN_HEX not in result.output


def test_no_option_takes_the_scan_key_and_a_key_like_argument_is_refused_unechoed(tmp_path):
    path = str(write_block(tmp_path))
    for args in (
        ["scan", path, "--scan-key", SCAN_HEX, "--spend-pubkey", SPEND_PUB],
        ["scan", path, SCAN_HEX, "--spend-pubkey", SPEND_PUB],
        [path, SCAN_HEX, "--spend-pubkey", SPEND_PUB],
        ["scan", path, "--spend-pubkey", SPEND_PUB, f"--scan-key-file={SCAN_HEX}"],
    ):
        result = invoke(*args, "--json")
        assert_fails(result)
        assert result.stdout == "" and SCAN_HEX not in result.output


@pytest.mark.parametrize("kind", ["spscan", "descriptor", "xprv"])
def test_a_scan_key_file_that_looks_like_an_encoded_key_or_descriptor_is_refused_unechoed(tmp_path, kind):
    desc = str(descriptor.from_keys(bytes.fromhex(SCAN_HEX), bytes.fromhex(SPEND_PUB)))
    value = {"spscan": desc[3:-1], "descriptor": desc, "xprv": "xprv9s21ZrQH143K" + "a" * 95}[kind]
    for command in (["scan", str(write_block(tmp_path))], ["address", "encode"]):
        result = invoke(*command, "--scan-key-file", value, "--spend-pubkey", SPEND_PUB)
        assert_fails(result, "looks like a key")
        assert value not in result.output


def test_the_scan_key_is_never_printed_even_on_errors(tmp_path):
    path = str(write_block(tmp_path))
    for extra in (["--spend-pubkey", SPEND_PUB], ["--spend-pubkey", SCAN_HEX], ["--spend-pubkey", "02" + "ff" * 32]):
        result = invoke("scan", path, *extra, env={"SP_SCAN_KEY": SCAN_HEX})
        assert SCAN_HEX not in result.output
    bad = invoke("scan", path, "--spend-pubkey", SPEND_PUB, env={"SP_SCAN_KEY": SCAN_HEX[:-2]})
    assert_fails(bad, "64 hex digits")
    assert SCAN_HEX[:-2] not in bad.output


def test_a_missing_scan_key_names_where_keys_come_from(tmp_path):
    assert_fails(invoke("scan", str(write_block(tmp_path)), "--spend-pubkey", SPEND_PUB, input=""), "--scan-key-file", "SP_SCAN_KEY", "stdin")


def test_help_says_where_keys_come_from():
    for args in ([], ["scan"]):
        text = " ".join(invoke(*args, "--help").stdout.split())
        assert "--scan-key-file F" in text and "SP_SCAN_KEY" in text and "stdin" in text and "never from an argument" in text


def test_bare_sp_scan_prints_help_and_exits_0():
    result = invoke()
    assert result.exit_code == 0 and result.stdout.startswith("Usage: sp-scan") and "tweaks" in result.stdout


def test_h_is_help_everywhere():
    for args in ([], ["scan"], ["index"], ["index", "scan"], ["psbt", "verify"], ["descriptor", "create"]):
        result = invoke(*args, "-h")
        assert result.exit_code == 0 and result.stdout.startswith("Usage: sp-scan") and result.stdout == invoke(*args, "--help").stdout


def test_an_unknown_first_word_is_an_unknown_command_with_suggestions_unless_it_names_a_file(tmp_path, monkeypatch):
    assert_fails(invoke("scna", "f.hex"), "No such command 'scna'. Did you mean 'scan'?")
    assert_fails(invoke("indx", "info", "--db", "x"), "No such command 'indx'. Did you mean 'index'?")
    assert_fails(invoke("index", "snyc", "--db", "x"), "No such command 'snyc'. Did you mean 'sync'?")
    assert "auto" not in assert_fails(invoke("aut", "x"))  # the hidden command is not suggested
    assert_fails(invoke("frobnicate"), "No such command 'frobnicate'.")
    result = invoke(SCAN_HEX)
    assert_fails(result, "looks like a key") and SCAN_HEX not in result.output
    monkeypatch.chdir(tmp_path)
    write_block(tmp_path, name="scna")  # a block file of that name runs `auto`
    assert json_lines(invoke("scna.hex", "--json").stdout) == expected_tweaks(TB)


def test_shell_completion_as_the_readme_sets_it_up_completes_commands():
    env = {**os.environ, "_SP_SCAN_COMPLETE": "bash_complete", "COMP_WORDS": "sp-scan index s", "COMP_CWORD": "2"}
    out = subprocess.run([sys.executable, "-m", "sp_scan.cli"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["plain,scan", "plain,sync"]
    script = subprocess.run([sys.executable, "-m", "sp_scan.cli"], env={**os.environ, "_SP_SCAN_COMPLETE": "bash_source"}, capture_output=True, text=True, timeout=60)
    assert "_sp_scan_completion" in script.stdout and "_SP_SCAN_COMPLETE=bash_complete" in script.stdout
    assert 'eval "$(_SP_SCAN_COMPLETE=bash_source sp-scan)"' in (ROOT / "README.md").read_text()


def test_errors_name_the_option_given_not_the_library_parameter(tmp_path):
    path = str(write_block(tmp_path))
    off_curve = "02" + "ff" * 32
    assert_fails(invoke("scan", path, "--spend-pubkey", off_curve, env={"SP_SCAN_KEY": SCAN_HEX}), "--spend-pubkey is not a valid compressed point")
    assert_fails(invoke("address", "encode", "--spend-pubkey", off_curve, env={"SP_SCAN_KEY": SCAN_HEX}), "--spend-pubkey is not a valid")
    assert_fails(invoke("scan", path, "--spend-pubkey", SPEND_PUB, env={"SP_SCAN_KEY": "00" * 32}), "the scan key is not a valid secret key")
    assert_fails(invoke("scan", path, "--spend-pubkey", SPEND_PUB, "--label", "-1", env={"SP_SCAN_KEY": SCAN_HEX}), "'--label'")


def test_bare_block_lists_tweaks_without_keys_and_scans_with_them(tmp_path):
    path = str(write_block(tmp_path))
    tweaks = invoke(path, "--json")
    assert tweaks.exit_code == 0 and json_lines(tweaks.stdout) == expected_tweaks(TB)
    scanned = invoke(path, "--json", env={"SP_SCAN_KEY": SCAN_HEX, "SP_SCAN_SPEND_PUBKEY": SPEND_PUB})
    assert scanned.exit_code == 0, scanned.output
    assert _found_set(json_lines(scanned.stdout)) == expected_found(TB)
    assert_fails(invoke(path, "--label", "1"), "--label needs a scan key")


# --- extract ---


def test_extract_classifies_every_input(tmp_path):
    result = invoke("extract", str(write_block(tmp_path)), "--json")
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert len(rows) == sum(len(tx.vin) for tx in TB.txs[1:])
    assert all(list(r) == ["txid", "vin", "type", "key", "reason"] for r in rows)
    assert {r["type"] for r in rows} >= {"p2pkh", "p2tr", "p2wpkh", "p2sh"}
    assert any(r["key"] is None and r["reason"] == "no eligible key" for r in rows)
    table = invoke("extract", str(write_block(tmp_path)))
    assert table.stdout.splitlines()[0].split() == ["TXID", "VIN", "TYPE", "KEY"]
    assert "not eligible (no eligible key)" in table.stdout


# --- address ---


def test_address_encode_and_decode_round_trip(tmp_path):
    result = invoke("address", "encode", "--scan-key-file", str(key_file(tmp_path)), "--spend-pubkey", SPEND_PUB, "--label", "2", "--json")
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert [r["label"] for r in rows] == [None, 2]
    expected = CASES[0]["expected"]["addresses"][0]
    assert rows[0]["address"] == expected
    decoded = invoke("address", "decode", rows[1]["address"], "--json")
    obj = json.loads(decoded.stdout)
    assert obj["spend_pubkey"] == address.labelled_spend_pubkey(bytes.fromhex(SCAN_HEX), bytes.fromhex(SPEND_PUB), 2).hex()
    assert obj["hrp"] == "sp" and obj["version"] == 0


def test_address_encode_from_a_scan_pubkey_for_a_test_network():
    scan_pub = PrivateKey(bytes.fromhex(SCAN_HEX)).public_key.format().hex()
    result = invoke("address", "encode", "--scan-pubkey", scan_pub, "--spend-pubkey", SPEND_PUB, "--network", "signet")
    assert result.exit_code == 0, result.output
    text = result.stdout.split()[-1]
    assert text.startswith("tsp1") and address.decode(text).scan_pubkey33.hex() == scan_pub


def test_address_encode_for_regtest_is_sprt_and_decode_reads_it_with_or_without_options():
    scan_pub = PrivateKey(bytes.fromhex(SCAN_HEX)).public_key.format().hex()
    result = invoke("address", "encode", "--scan-pubkey", scan_pub, "--spend-pubkey", SPEND_PUB, "--network", "regtest")
    assert result.exit_code == 0, result.output
    text = result.stdout.split()[-1]
    assert text.startswith("sprt1")
    for options in ([], ["--network", "regtest"], ["--hrp", "sprt"]):
        decoded = invoke("address", "decode", text, "--json", *options)
        assert decoded.exit_code == 0, decoded.output
        assert json.loads(decoded.stdout)["hrp"] == "sprt"
    assert_fails(invoke("address", "decode", text, "--network", "signet"), "hrp")


def test_address_errors_are_one_line():
    assert_fails(invoke("address", "decode", "sp1qqqqqq"), "bech32m")
    good = CASES[0]["expected"]["addresses"][0]
    assert_fails(invoke("address", "decode", good, "--network", "regtest"), "hrp")
    assert_fails(invoke("address", "decode", good, "--network", "main", "--hrp", "tsp"))
    assert_fails(invoke("address", "encode", "--scan-pubkey", "02" + "ff" * 32, "--spend-pubkey", SPEND_PUB), "--scan-pubkey is not a valid")


# --- failures: one line, exit 2, no traceback ---


def test_malformed_hex_exits_2(tmp_path):
    path = tmp_path / "block.hex"
    path.write_text(TB.raw.hex()[:-1] + "g\n")
    (tmp_path / "block.spent.hex").write_text(TB.spent_bytes.hex())
    assert_fails(invoke("tweaks", str(path)), "block: not hex")
    path.write_text(TB.raw.hex() + "0\n")
    assert_fails(invoke("tweaks", str(path)), "not hex")


def test_truncated_block_exits_2(tmp_path):
    path = write_block(tmp_path)
    path.write_text(TB.raw[:-3].hex())
    assert_fails(invoke("tweaks", str(path)), str(path), "block: truncated")


def test_trailing_bytes_exit_2(tmp_path):
    path = write_block(tmp_path)
    path.write_text(TB.raw.hex() + "00")
    assert_fails(invoke("tweaks", str(path)), "block: 1 trailing bytes")


def test_spent_data_of_the_wrong_shape_exits_2(tmp_path):
    path = write_block(tmp_path, spent_fmt=None)
    from sp_scan.wire import serialize_spent

    (tmp_path / "block.spent.bin").write_bytes(serialize_spent(TB.spent[:-1]))
    assert_fails(invoke("tweaks", str(path)), "spent outputs cover")
    fewer = [list(tx) for tx in TB.spent]
    fewer[1] = fewer[1][:-1]
    (tmp_path / "block.spent.bin").write_bytes(serialize_spent(fewer))
    assert_fails(invoke("tweaks", str(path)), "inputs but")
    (tmp_path / "block.spent.bin").write_bytes(TB.spent_bytes[:-2])
    assert_fails(invoke("tweaks", str(path)), "spent outputs: truncated")


def test_unknown_format_exits_2(tmp_path):
    path = write_block(tmp_path, spent_fmt=None)
    spent = tmp_path / "notes.txt"
    spent.write_text("these are not spent outputs\n")
    assert_fails(invoke("tweaks", str(path), "--spent", str(spent)), "unknown format")
    spent.write_text('{"tx": "nope"}')
    assert_fails(invoke("tweaks", str(path), "--spent", str(spent)), "getblock JSON")


def test_missing_file_exits_2(tmp_path):
    assert_fails(invoke("tweaks", str(tmp_path / "none.hex")), "none.hex", "No such file")
    path = write_block(tmp_path, spent_fmt=None)
    assert_fails(invoke("tweaks", str(path), "--spent", str(tmp_path / "gone.bin")), "gone.bin")
    assert_fails(invoke("scan", str(write_block(tmp_path)), "--scan-key-file", str(tmp_path / "nokey"), "--spend-pubkey", SPEND_PUB), "nokey")


def test_missing_prevouts_exit_2_naming_the_options(tmp_path):
    path = write_block(tmp_path, spent_fmt=None)
    assert_fails(invoke("tweaks", str(path)), "no prevouts for", "--spent FILE", "block.spent.hex", "--rest/--rpc")


def test_usage_problems_exit_2_in_one_line(tmp_path):
    path = str(write_block(tmp_path))
    assert_fails(invoke("tweaks"), "BLOCK")
    assert_fails(invoke("tweaks", path, "--jobs", "0"))
    assert_fails(invoke("tweaks", path, "--from", "1"), "--rest or --rpc")
    assert_fails(invoke("tweaks", "--rest", "http://x", "--rpc", "http://y", "--from", "0"), "not both")
    assert_fails(invoke("tweaks", path, path, "--spent", path), "single BLOCK")
    assert_fails(invoke("scan", path, "--spend-pubkey", "abc", env={"SP_SCAN_KEY": SCAN_HEX}), "--spend-pubkey must be 66 hex digits")


def test_output_printed_before_a_failure_stays_valid_json_lines(tmp_path):
    good = write_block(tmp_path, TB, "good")
    bad = write_block(tmp_path, TB, "bad")
    bad.write_text(TB.raw[:-1].hex())
    result = invoke("tweaks", str(good), str(bad), "--json")
    assert_fails(result, "bad.hex")
    assert json_lines(result.stdout) == expected_tweaks(TB)


def test_an_unreachable_node_exits_2():
    assert_fails(invoke("tweaks", "--rest", closed_port_url(), "--from", "0"), "cannot reach the node")
    assert_fails(invoke("tweaks", "--rpc", closed_port_url(), "--rpc-user", "u:p", "--from", "0", "--to", "1"), "cannot reach the node")


# --- node ranges ---

CHAIN = Chain(length=6, per_block=4)
rest, rpc = node_fixtures(CHAIN, f"__cookie__:{PASSWORD}")


def test_rest_range_mode_end_to_end(rest):
    result = invoke("tweaks", "--rest", rest.url, "--from", "0", "--to", str(CHAIN.tip), "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == CHAIN.expected_tweaks(0, CHAIN.tip)
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_rest_range_defaults_to_the_tip_and_restarts_from_a_height(rest):
    result = invoke("tweaks", "--rest", rest.url, "--from", "3", "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == CHAIN.expected_tweaks(3, CHAIN.tip)


def test_rest_range_with_workers_keeps_block_order(rest, tmp_path):
    args = ["scan", "--rest", rest.url, "--from", "0", "--scan-key-file", str(key_file(tmp_path)), "--spend-pubkey", SPEND_PUB, "--json"]
    one = invoke(*args)
    three = invoke(*args, "--jobs", "3")
    assert one.exit_code == three.exit_code == 0, three.output
    assert one.stdout == three.stdout and len(json_lines(one.stdout)) > 5


def test_rest_range_past_the_tip_exits_2_after_valid_output(rest):
    result = invoke("tweaks", "--rest", rest.url, "--from", str(CHAIN.tip), "--to", str(CHAIN.tip + 1), "--json")
    assert_fails(result, "Block height out of range")
    assert json_lines(result.stdout) == CHAIN.expected_tweaks(CHAIN.tip, CHAIN.tip)


@pytest.mark.parametrize("auth", ["cookie", "user-pass", "user-env"])
def test_rpc_range_mode_end_to_end(rpc, tmp_path, auth):
    cookie = tmp_path / ".cookie"
    cookie.write_text(f"__cookie__:{PASSWORD}")
    extra, env = {
        "cookie": (["--rpc-cookie", str(cookie)], {}),
        "user-pass": (["--rpc-user", f"__cookie__:{PASSWORD}"], {}),
        "user-env": (["--rpc-user", "__cookie__"], {"SP_SCAN_RPC_PASSWORD": PASSWORD}),
    }[auth]
    result = invoke("tweaks", "--rpc", rpc.url, *extra, "--from", "1", "--to", "4", "--json", "--jobs", "2", env=env)
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == CHAIN.expected_tweaks(1, 4)


def test_rpc_with_a_wrong_password_exits_2_without_echoing_it(rpc):
    result = invoke("tweaks", "--rpc", rpc.url, "--rpc-user", "__cookie__:not-it", "--from", "0")
    assert_fails(result, "authentication failed")
    assert "not-it" not in result.output


# --- progress and Ctrl-C ---


def test_progress_shows_rate_and_eta():
    now = [100.0]
    stream = io.StringIO()
    progress = Progress(10, stream, True, clock=lambda: now[0])
    now[0] += 4.0
    progress.update(2, "block 7")
    progress.close()
    text = stream.getvalue()
    assert "2/10 blocks (20%)" in text and "0.50 blocks/s" in text and "ETA 0:00:16" in text and "block 7" in text
    assert text.startswith("\r") and text.endswith("\n")
    silent = io.StringIO()
    Progress(10, silent, False).update(1, "x")
    assert silent.getvalue() == ""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_exits_130_with_a_resume_height_and_valid_output(tmp_path, jobs):
    held = 3
    server = NodeServer(RestHandler, CHAIN)
    server.hold(held)  # the node hangs on the hash of block 3: the run is interrupted mid-range whatever the load
    try:
        code = "from sp_scan.cli import main; main()"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        args = [sys.executable, "-c", code, "tweaks", "--rest", server.url, "--from", "0", "--json", "--jobs", jobs]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path, text=True)
        first = proc.stdout.readline()  # a block's output is out
        assert server.held.wait(120), "the run never asked for block 3"
        proc.send_signal(signal.SIGINT)
        rest_out, err = proc.stdout.read(), proc.stderr.read()  # not communicate(): readline buffered some
        proc.wait(timeout=120)
    finally:
        server.stop()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sp-scan: interrupted; resume with --from ")
    resume = int(lines[0].rsplit(" ", 1)[1])
    assert 1 <= resume <= held
    rows = json_lines(first + rest_out)
    assert rows == CHAIN.expected_tweaks(0, resume - 1)
