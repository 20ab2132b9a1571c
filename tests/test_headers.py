"""Headers checked as Bitcoin Core checks them (sp_scan.headers): Core's own retarget vectors and mainnet's genesis
header, then chains mined here under each network's rules (made easy: a target near 2^255, 4-block periods)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import struct

import pytest

from sp_scan.errors import SourceError
from sp_scan.headers import HeaderChain, compact, fork_point, meets, retarget, target, work
from sp_scan.network import get
from sp_scan.wire import sha256d

MAIN = get("main").pow


@pytest.mark.parametrize(
    ("last_bits", "first_time", "last_time", "expected"),
    [
        (0x1D00FFFF, 1261130161, 1262152739, 0x1D00D86A),  # block 32255: no bound applies
        (0x1D00FFFF, 1231006505, 1233061996, 0x1D00FFFF),  # block 2015: the proof-of-work limit
        (0x1C05A3F4, 1279008237, 1279297671, 0x1C0168FD),  # block 68543: the 4x bound on a short period
        (0x1C387F6F, 1263163443, 1269211443, 0x1D00E1FD),  # block 46367: the 4x bound on a long period
    ],
    ids=["no-bound", "limit", "short-period", "long-period"],
)
def test_a_mainnet_retarget_gives_what_cores_pow_tests_expect(last_bits, first_time, last_time, expected):
    assert retarget(MAIN, last_bits, last_bits, last_time - first_time) == expected


def test_mainnets_genesis_header_meets_its_nbits_and_another_nonce_does_not():
    merkle = bytes.fromhex("4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b")[::-1]
    genesis = struct.pack("<i32s32sIII", 1, bytes(32), merkle, 1231006505, 0x1D00FFFF, 2083236893)
    assert sha256d(genesis)[::-1].hex() == get("main").genesis
    assert meets(sha256d(genesis), 0x1D00FFFF, MAIN) and work(0x1D00FFFF) == 0x100010001  # Core's chainwork of block 0
    assert not meets(sha256d(genesis[:-4] + struct.pack("<I", 1)), 0x1D00FFFF, MAIN)
    assert not meets(sha256d(genesis), 0x207FFFFF, MAIN)  # a target easier than the chain's limit


def test_compact_targets_are_decoded_as_core_does():
    assert target(0x03000001) == 1  # the header: no hash meets it
    assert target(0x04923456) is None and target(0x01FEDCBA) is None  # negative
    assert target(0xFF123456) is None and target(0) is None  # overflow, zero
    assert compact(target(0x1D00FFFF)) == 0x1D00FFFF and compact(MAIN.limit) == 0x1D00FFFF
    assert compact(get("signet").pow.limit) == 0x1E0377AE and compact(get("regtest").pow.limit) == 0x207FFFFF


# ---- chains mined under each network's rules ----

EASY = (1 << 255) - 1
START = 1_700_000_000


def mine(prev32: bytes, stamp: int, bits: int, rules, salt: bytes = b"") -> bytes:
    merkle = hashlib.sha256(prev32 + salt).digest()
    for nonce in itertools.count():
        header = struct.pack("<i32s32sIII", 0x20000000, prev32, merkle, stamp, bits, nonce)
        if meets(sha256d(header), bits, rules):
            return header


class Miner:
    """A chain under `rules` from a genesis block at START, its headers in `headers`."""

    def __init__(self, **rules) -> None:
        base = dataclasses.replace(MAIN, limit=EASY, interval=4, checkpoint=(0, ""), **rules)
        genesis = mine(bytes(32), START, compact(EASY), base)
        self.rules = dataclasses.replace(base, checkpoint=(0, sha256d(genesis)[::-1].hex()))
        self.headers = [genesis]
        self.chain = HeaderChain(self.rules, now=lambda: START + 10**6)
        self.chain.anchor(0, [genesis])

    def next(self, seconds: int = 600, bits: int | None = None) -> bytes:
        """A header `seconds` after the last one, with the nBits the rules give (or `bits`)."""
        prev = self.headers[-1]
        stamp = struct.unpack_from("<I", prev, 68)[0] + seconds
        header = mine(sha256d(prev), stamp, self.chain._next_bits(len(self.headers), stamp) if bits is None else bits, self.rules)
        return header

    def add(self, seconds: int = 600, bits: int | None = None) -> bytes:
        header = self.next(seconds, bits)
        self.chain.extend(len(self.headers), [header])
        self.headers.append(header)
        return header

    def refused(self, header: bytes, message: str) -> None:
        with pytest.raises(SourceError, match=message):
            self.chain.extend(len(self.headers), [header])


HARD = compact(EASY * 600 // 2400)  # a first period of a few seconds: the 4x bound


def bits_of(header: bytes) -> int:
    return struct.unpack_from("<I", header, 72)[0]


def test_mainnet_rules_retarget_every_period_by_its_time_span_within_4x_and_nowhere_else():
    m = Miner()
    for _ in range(3):
        m.add(seconds=1)  # a period of 3 s: the 4x bound
    m.refused(m.next(bits=compact(EASY)), f"has nBits 207fffff, not the {HARD:08x} the chain's retarget rules give")
    m.add()
    assert bits_of(m.headers[4]) == HARD
    m.refused(m.next(bits=compact(EASY)), f"not the {HARD:08x}")  # within a period nBits stay
    for _ in range(3):
        m.add(seconds=1200)  # 3 x 1200 s from the period's first block to its last, for 2400 s: 1.5 times easier
    m.add()
    assert bits_of(m.headers[8]) == compact(target(HARD) * 3600 // 2400)
    assert m.chain.work(0, 8) == 4 * work(compact(EASY)) + 4 * work(HARD) + work(bits_of(m.headers[8]))


def test_the_testnet_20_minute_rule_allows_the_limit_only_after_20_minutes_then_returns_to_the_periods_nbits():
    m = Miner(min_difficulty=True)
    for _ in range(3):
        m.add(seconds=1)
    m.add()  # block 4: harder after the retarget
    assert bits_of(m.headers[4]) == HARD
    m.refused(m.next(seconds=1200, bits=compact(EASY)), f"not the {HARD:08x}")  # 20 minutes exactly: not yet
    m.add(seconds=1201, bits=compact(EASY))  # more than 20 minutes: the limit
    m.refused(m.next(seconds=600, bits=compact(EASY)), f"not the {HARD:08x}")  # then the period's last other nBits again
    m.add()
    assert bits_of(m.headers[6]) == HARD


def test_testnet4_retargets_from_the_periods_first_block_and_refuses_a_time_warp():
    retargets = {}
    for bip94 in (False, True):
        m = Miner(min_difficulty=True, bip94=bip94)
        for _ in range(3):
            m.add(seconds=1)
        m.add(seconds=600)  # block 4 (hard) opens a period whose last block is at the limit
        m.add(seconds=600)
        m.add(seconds=1201, bits=compact(EASY))
        m.add(seconds=1201, bits=compact(EASY))
        retargets[bip94] = m.chain._next_bits(8, START + 10**5)
        if bip94:
            m.refused(m.next(seconds=-601, bits=retargets[bip94]), "more than 600 s older than its parent at a retarget")
            m.add(seconds=-600, bits=retargets[bip94])
    assert retargets[True] == compact(target(HARD) * (600 + 1201 + 1201) // 2400)
    assert retargets[False] == compact(EASY)  # testnet3 starts from the period's last block: the limit's nBits


def test_regtest_never_retargets_and_every_header_keeps_the_limit():
    m = Miner(min_difficulty=True, retarget=False)
    for _ in range(6):
        m.add(seconds=1)
    assert {bits_of(h) for h in m.headers} == {0x207FFFFF}
    m.refused(m.next(bits=0x2000FFFF), "not the 207fffff")


def test_a_header_must_be_later_than_the_median_of_the_11_before_it_and_not_2_hours_ahead():
    m = Miner()
    for _ in range(11):
        m.add(seconds=700)
    m.refused(m.next(seconds=-5 * 700), "not later than the median time of the 11 blocks before it")  # the median's own time
    m.refused(m.next(seconds=10**6), "more than two hours in the future")
    m.add(seconds=-5 * 700 + 1)


def test_a_header_that_does_not_meet_its_own_nbits_or_name_its_parent_is_refused():
    m = Miner()
    m.add()
    bad = bytearray(m.next())
    while meets(sha256d(bytes(bad)), 0x207FFFFF, m.rules):
        bad[76] = (bad[76] + 1) % 256
    m.refused(bytes(bad), "does not meet its own nBits 207fffff")
    m.refused(mine(b"\x01" * 32, START + 5000, 0x207FFFFF, m.rules), "does not name block 1 as its parent")
    impossible = struct.pack("<i32s32sIII", 0x20000000, sha256d(m.headers[-1]), bytes(32), START + 5000, 0x03000001, 0)
    m.refused(impossible, "does not meet its own nBits 03000001")


def test_headers_below_the_checkpoint_must_lead_to_its_hash_and_a_fork_at_or_below_it_is_refused():
    m = Miner()
    for _ in range(6):
        m.add()
    rules = dataclasses.replace(m.rules, checkpoint=(5, sha256d(m.headers[5])[::-1].hex()))
    chain = HeaderChain(rules, now=lambda: START + 10**6)
    with pytest.raises(SourceError, match="is not the checkpoint"):
        chain.anchor(0, m.headers[:5])
    chain.anchor(2, m.headers[2:6])
    chain.anchor(0, m.headers[:2])  # below what is kept: it must lead up to it
    assert chain.base == 0 and chain.top == 5 and chain.hash32(3) == sha256d(m.headers[3])
    chain.extend(6, [m.headers[6]])
    other = mine(sha256d(m.headers[3]), START + 9000, bits_of(m.headers[4]), rules, salt=b"fork")
    with pytest.raises(SourceError, match="not the one that leads to the checkpoint"):
        chain.extend(4, [other])


def test_a_branch_replaces_the_kept_headers_above_where_it_leaves_them_and_its_work_can_be_compared():
    m = Miner()
    for _ in range(5):
        m.add()
    before = m.chain.work(4, 5)
    bits = bits_of(m.headers[4])
    fork = [mine(sha256d(m.headers[3]), START + 3000, bits, m.rules, salt=b"fork")]
    for i in (1, 2):
        fork.append(mine(sha256d(fork[-1]), START + 3000 + 600 * i, bits, m.rules, salt=b"fork"))
    m.chain.extend(4, fork)
    assert m.chain.top == 6 and m.chain.hash32(4) == sha256d(fork[0]) and m.chain.work(4, 6) > before


@pytest.mark.parametrize("depth", [0, 1, 5, 9])
def test_fork_point_is_the_highest_height_both_chains_hold_and_asks_nothing_below_it(depth):
    ours = {h: bytes([h]) * 32 for h in range(10, 20)}
    theirs = {h: ours[h] if h < 20 - depth else b"\xff" * 32 for h in range(10, 25)}
    asked = []
    pairs = ((h, ours[h]) for h in range(19, 9, -1))
    assert fork_point(pairs, lambda h: asked.append(h) or theirs.get(h)) == 19 - depth
    assert asked == list(range(19, 18 - depth, -1))
    assert next(pairs, None) == ((18 - depth, ours[18 - depth]) if depth < 9 else None)  # the walk read no further


def test_fork_point_is_none_when_no_block_is_shared_and_a_height_they_lack_is_not_shared():
    ours = [(h, bytes([h]) * 32) for h in range(19, 9, -1)]
    assert fork_point(ours, lambda h: b"\xff" * 32) is None
    assert fork_point(ours, lambda h: None) is None
    assert fork_point(ours, lambda h: dict(ours)[h] if h < 15 else None) == 14  # they end at 14, below our tip
    assert fork_point([], lambda h: pytest.fail("asked")) is None
