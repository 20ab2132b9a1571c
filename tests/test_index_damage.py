"""Damage inside an index's rows, made with sqlite3 as bit rot or a careless hand would: every read
finds it — `sp-scan index scan` and `index info --check` say so in one line with exit 2, `sp-scan
serve` answers an HTTP error with a JSON body — and none gives a wrong answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli_support import spending_chain
from index_support import SCAN_HEX, SPEND_HEX, WALLET, damage, synced
from serving import ServerThread, get
from test_cli import assert_fails, invoke, json_lines

CHAIN = spending_chain(9)


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    """The synced index, and where its wallet's matches are: a block with a spent match, and a match's tx."""
    path = tmp_path_factory.mktemp("intact") / "chain.db"
    with synced(path, CHAIN) as idx:
        matches = list(idx.scan(WALLET))
        spent_at = next(m.height for m in matches if m.spent)
        paid = matches[len(matches) // 2]
        tx = [t for t, _, _ in idx.eligible_txs(paid.height)].index(paid.txid32)
    assert len(matches) > 10
    return path, spent_at, paid.height, tx


ROUTES = ("tweaks/{h}", "tweak-index/{h}", "utxos/{h}", "spent-index/{h}", "filter/spent/{h}", "filter/new-utxos/{h}")


def cases(spent_at: int, paid_at: int, tx: int) -> dict[str, tuple[str, int, tuple[str, ...]]]:
    """name -> (the damage, the height whose answers it changes, the routes whose answers it changes there)."""
    return {
        "a deleted blocks row": (f"DELETE FROM blocks WHERE height = {paid_at}", paid_at, ROUTES),
        "a deleted spends row": (f"DELETE FROM spends WHERE height = {spent_at}", spent_at, ("tweaks/{h}", "utxos/{h}")),
        "a flipped bit in a stored txid": (f"UPDATE blocks SET txids = flip(txids, {256 * tx + 3}) WHERE height = {paid_at}", paid_at, ("utxos/{h}",)),
        "a missing meta row": ("DELETE FROM meta WHERE key = 'first_height'", paid_at, ROUTES),
    }


NAMES = list(cases(0, 0, 0))


@pytest.fixture(params=NAMES)
def damaged(request, intact, tmp_path) -> tuple[Path, int]:
    path, *where = intact
    copy = tmp_path / "damaged.db"
    shutil.copy(path, copy)
    sql, height, _ = cases(*where)[request.param]
    damage(copy, sql)
    return copy, height


@pytest.fixture
def key(tmp_path):
    path = tmp_path / "wallet.scan"
    path.write_text(SCAN_HEX + "\n")
    return str(path)


def test_the_intact_index_scans_and_checks(intact, key):
    result = invoke("index", "scan", "--db", str(intact[0]), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--json")
    assert result.exit_code == 0 and len(json_lines(result.stdout)) > 10
    result = invoke("index", "info", "--db", str(intact[0]), "--check", "--json")
    assert result.exit_code == 0 and json_lines(result.stdout)[0]["check"] == "ok"


def test_index_scan_says_the_index_is_damaged_in_one_line_and_exits_2(damaged, key):
    path, _ = damaged
    result = invoke("index", "scan", "--db", str(path), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--json")
    assert_fails(result, "damaged.db is damaged: ")


def test_index_info_check_finds_the_damage(damaged):
    path, _ = damaged
    assert_fails(invoke("index", "info", "--db", str(path), "--check"), "damaged.db is damaged: ")


def test_the_server_answers_an_error_for_damage_made_while_it_runs_never_a_wrong_answer(intact, tmp_path):
    path, *where = intact
    for name, (sql, height, changed) in cases(*where).items():
        copy = tmp_path / f"{NAMES.index(name)}.db"
        shutil.copy(path, copy)
        with ServerThread(copy) as server:
            before = {route: get(f"{server.url}/{route.format(h=height)}") for route in ROUTES if route not in changed}
            damage(copy, sql)
            for route in ROUTES:
                status, _, body = get(f"{server.url}/{route.format(h=height)}")
                if route in changed or status != 200:
                    assert status == 503 and "is damaged: " in body["error"], (name, route, status, body)
                else:  # an answer the damage does not touch
                    assert (status, body) == (before[route][0], before[route][2]), (name, route)
