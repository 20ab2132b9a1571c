"""Many wallets in one pass over the tweak index: `index scan --wallets FILE` and `scan_partition_wallets`.

The index is synced by the real sync from the kernel-validated sample chain; what each wallet must
find is what the sender side recorded while building the chain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kernelchain as kc
from sp_scan import descriptor
from sp_scan.errors import HeightError
from sp_scan.index import Index, scan_partition, scan_partition_wallets
from sp_scan.node import RestNode
from test_cli import assert_fails, invoke, json_lines

LATE = 104
"""The birthday height of the "late" wallet (a descriptor with bh)."""


def write_wallets(directory: Path) -> Path:
    """A wallets file of three wallets: the test wallet (labels 1, 7), the other wallet, and the test
    wallet again as a descriptor born at LATE (labels 1..7); key files beside it."""
    (directory / "keys").mkdir(exist_ok=True)
    (directory / "keys" / "wallet.scan").write_text(kc.TEST_WALLET.scan_key32.hex() + "\n")
    (directory / "keys" / "other.scan").write_text(kc.OTHER_WALLET.scan_key32.hex() + "\n")
    late = descriptor.from_keys(kc.TEST_WALLET.scan_key32, kc.TEST_WALLET.spend_pubkey33, network="test", annotations=(("bh", LATE), ("ml", 7)))
    (directory / "keys" / "late.desc").write_text(str(late) + "\n")
    path = directory / "wallets.txt"
    path.write_text(
        "# name  fields\n"
        f"wallet  scan-key-file=keys/wallet.scan  spend-pubkey={kc.TEST_WALLET.spend_pubkey33.hex()}  labels=1,7\n"
        "\n"
        f"other   spend-pubkey={kc.OTHER_WALLET.spend_pubkey33.hex()} scan-key-file={directory / 'keys' / 'other.scan'}  # absolute path\n"
        "late    descriptor-file=keys/late.desc\n"
    )
    return path


WALLETS = [("wallet", kc.TEST_WALLET, 0), ("other", kc.OTHER_WALLET, 0), ("late", kc.TEST_WALLET, LATE)]
"""What write_wallets' file holds: name, the chain's wallet, first height."""


def expected_rows(chain: kc.KernelChain, wallets=WALLETS) -> list[dict]:
    """The JSON lines of `index scan --wallets`: each wallet's payments, in chain, vout, then file order."""
    where = {t.txid32: (b.height, i) for b in chain.active() for i, t in enumerate(b.txs)}
    rows = [
        (where[f.txid32], f.vout, w, {"wallet": name, **f.to_json()})
        for w, (name, wallet, start) in enumerate(wallets)
        for f in chain.found(wallet, start)
    ]
    return [r[3] for r in sorted(rows, key=lambda r: r[:3])]


def test_many_wallets_in_one_pass_find_what_the_sender_paid_each(kernel_chain, kernel_index, tmp_path):
    wallets = write_wallets(tmp_path)
    result = invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--json", "--jobs", "2", "--partition-blocks", "4")
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert rows == expected_rows(kernel_chain)
    assert {r["wallet"] for r in rows} == {"wallet", "other", "late"} and min(r["height"] for r in rows if r["wallet"] == "late") >= LATE


def test_from_scans_every_wallet_from_there_and_the_table_names_the_wallet(kernel_chain, kernel_index, tmp_path):
    wallets = write_wallets(tmp_path)
    result = invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--from", "102", "--to", "105")
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split()[:3] == ["WALLET", "HEIGHT", "TXID"]
    # --from overrides the descriptor's birthday: "late" is scanned from 102 like the others.
    late_from_102 = [("wallet", kc.TEST_WALLET, 102), ("other", kc.OTHER_WALLET, 102), ("late", kc.TEST_WALLET, 102)]
    expected = [r for r in expected_rows(kernel_chain, late_from_102) if r["height"] <= 105]
    assert [(line.split()[0], int(line.split()[1]), line.split()[2]) for line in lines] == [(r["wallet"], r["height"], r["txid"]) for r in expected]
    assert any(r["wallet"] == "late" and r["height"] < LATE for r in expected)


def test_a_partition_scanned_for_many_wallets_is_each_wallets_scan_from_its_first_height(kernel_index):
    with Index.open(kernel_index, readonly=True) as idx:
        tip = idx.tip()[0]
        partition = idx.partition(100, tip)
    receivers = [kc.TEST_WALLET.receiver(), kc.OTHER_WALLET.receiver(), kc.TEST_WALLET.receiver()]
    starts = [None, tip + 1, LATE]  # the second wallet's birthday is past the partition
    found = scan_partition_wallets(partition, receivers, threads=2, starts=starts)
    alone = [scan_partition(partition, r) for r in receivers]
    assert [m for w, m in found if w == 0] == alone[0]
    assert [m for w, m in found if w == 1] == [] and alone[1]
    assert [m for w, m in found if w == 2] == [m for m in alone[2] if m.height >= LATE]
    assert [m.height for _, m in found] == sorted(m.height for _, m in found)
    with pytest.raises(ValueError):
        scan_partition_wallets(partition, receivers, starts=[None])


HEX64 = "ab" * 32


@pytest.mark.parametrize(
    "line, needle",
    [
        (f"alice scan-key-file={HEX64} spend-pubkey={kc.TEST_WALLET.spend_pubkey33.hex()}", "looks like a key"),
        (f"alice {HEX64}", "field 2 is not one of"),
        (f"{HEX64} scan-key-file=keys/wallet.scan", "starts with the wallet's name"),
        ("alice descriptor-file=sp(spscan1qqqqqq)", "looks like a key"),
        (f"alice scan-key-file=keys/wallet.scan spend-pubkey={kc.TEST_WALLET.spend_pubkey33.hex()} labels=1,x", "labels= takes"),
        (f"alice scan-key-file=keys/wallet.scan spend-pubkey={kc.TEST_WALLET.spend_pubkey33.hex()} labels=99999999999", "labels= are integers below 2**32"),
        (f"alice scan-key-file=keys/wallet.scan spend-pubkey={'02' + 'ff' * 32}", "spend-pubkey= is not a valid compressed point"),
        ("alice scan-key-file=keys/wallet.scan", "needs scan-key-file= and spend-pubkey="),
        ("alice descriptor-file=keys/late.desc labels=1", "not both"),
        ("alice descriptor-file=keys/late.desc descriptor-file=keys/late.desc", "given twice"),
        (f"alice scan-key-file=keys/missing.scan spend-pubkey={kc.TEST_WALLET.spend_pubkey33.hex()}", "missing.scan"),
        (f"alice scan-key-file=keys/wallet.scan spend-pubkey={HEX64}", "spend-pubkey= must be 66 hex digits"),
        ("wallet descriptor-file=keys/late.desc", "a second wallet named wallet"),
        ("# nothing but a comment", "no wallets"),
    ],
    ids=[
        "key-in-place-of-a-path", "key-as-a-field", "key-as-the-name", "descriptor-in-place-of-a-path", "bad-label", "label-above-2**32",
        "spend-key-off-the-curve",
        "no-spend-key", "descriptor-and-labels", "field-twice", "missing-key-file", "bad-spend-key", "duplicate-name", "empty",
    ],
)  # fmt: skip
def test_a_bad_wallets_line_is_one_line_naming_it_without_its_values(kernel_index, tmp_path, line, needle):
    wallets = write_wallets(tmp_path)
    first = wallets.read_text() if needle.startswith("a second") else ""
    wallets.write_text(first + line + "\n")
    message = assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets)), needle)
    assert HEX64 not in message and "spscan1" not in message and kc.TEST_WALLET.scan_key32.hex() not in message
    if needle != "no wallets":
        assert f"wallets.txt:{len(first.splitlines()) + 1}:" in message


def test_wallets_and_one_wallets_options_are_refused_together(kernel_index, tmp_path):
    wallets = write_wallets(tmp_path)
    spend = ["--spend-pubkey", kc.TEST_WALLET.spend_pubkey33.hex()]
    for extra in (["--scan-key-file", str(tmp_path / "keys" / "wallet.scan")], ["--label", "1"], ["--descriptor-file", str(tmp_path / "keys" / "late.desc")], spend):
        assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), *extra), "not both")
    from_env = invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--to", "101", env={"SP_SCAN_SPEND_PUBKEY": spend[1]})
    assert from_env.exit_code == 0, from_env.output  # a spend key from the environment is not a typed option
    assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--dask-tls-ca", "ca.pem"), "go with --dask")


def test_partition_ranges_cover_the_heights_asked_for_in_order(kernel_index):
    with Index.open(kernel_index, readonly=True) as idx:
        assert idx.partition_ranges(100, 110, 4) == [(100, 103), (104, 107), (108, 110)]
        assert idx.partition_ranges(partition_blocks=200) == [(0, kc.SAMPLE_TIP)]
        with pytest.raises(HeightError):
            idx.partition_ranges(100, kc.SAMPLE_TIP + 1)
        with pytest.raises(ValueError):
            idx.partition_ranges(partition_blocks=0)


def test_ctrl_c_mid_scan_exits_130_naming_the_height_to_resume_at_after_the_lines_before_it(kernel_chain, kernel_index, tmp_path, monkeypatch):
    import sp_scan.index.tweak_index

    def interrupted_at_105(partition, *args):
        if partition.start == 105:
            raise KeyboardInterrupt
        return scan_partition_wallets(partition, *args)

    monkeypatch.setattr(sp_scan.index.tweak_index, "scan_partition_wallets", interrupted_at_105)
    wallets = write_wallets(tmp_path)
    result = invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--json", "--from", "100", "--partition-blocks", "5")
    assert result.exit_code == 130 and result.stderr == "sp-scan: interrupted; resume with --from 105\n"
    from_100 = [(n, w, 100) for n, w, _ in WALLETS]  # --from overrides the descriptor's birthday
    assert json_lines(result.stdout) == [r for r in expected_rows(kernel_chain, from_100) if r["height"] < 105]


def test_wallets_born_before_the_index_begins_are_scanned_from_its_first_block(kernel_chain, kernel_rest, tmp_path):
    path = tmp_path / "from-105.db"
    with Index.create(path, "regtest") as idx:
        idx.sync(RestNode(kernel_rest.url), start=LATE + 1)
    write_wallets(tmp_path)
    late = tmp_path / "late.txt"
    late.write_text("late  descriptor-file=keys/late.desc\n")  # born at LATE, one block before the index
    expected = expected_rows(kernel_chain, [("late", kc.TEST_WALLET, LATE + 1)])
    assert expected
    result = invoke("index", "scan", "--db", str(path), "--wallets", str(late), "--json")
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout) == expected
    single = invoke("index", "scan", "--db", str(path), "--descriptor-file", str(tmp_path / "keys" / "late.desc"), "--json")
    assert single.exit_code == 0, single.output
    assert json_lines(single.stdout) == [{k: v for k, v in r.items() if k != "wallet"} for r in expected]
    assert_fails(invoke("index", "scan", "--db", str(path), "--wallets", str(late), "--from", str(LATE)), "not all indexed")
