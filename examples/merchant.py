"""A merchant's backend: follow a wallet over a BlindBit server, one line per payment, reversal and unconfirmed arrival.

    SP_SCAN_KEY=… python examples/merchant.py shop.wallet --blindbit http://127.0.0.1:8000 [--mempool-from tweaks.db]

The wallet file is made beforehand (`sp-scan wallet create`, or `Wallet.from_descriptor`); the scan key comes from
SP_SCAN_KEY or the first line of stdin, never an argument. BlindBit serves no mempool: `--mempool-from` names a
source that does (an index kept by `sp-scan index sync --follow --mempool`, or a Frigate server), synced after each
BlindBit round for the unconfirmed payments. `--verify-with` proves what BlindBit lists (a node's REST, or an
Electrum server). Each line is printed once the wallet committed what it says:

    paid TXID:VOUT SATS at HEIGHT [unverified]     a block paid the shop
    reversed TXID:VOUT SATS                          the payment is gone: a fork took its block, or a prover refuted it
    unconfirmed TXID:VOUT SATS                       a payment waits in the mempool
    dropped TXID:VOUT SATS REASON                    it left the mempool without a block (replaced, evicted, reorg)
    spent TXID:VOUT at HEIGHT                        the shop's coin was spent

Ctrl-C or SIGTERM stops it between blocks, with what it finished committed. Only `sp_scan.wallet`'s public API is used.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

from sp_scan.errors import ServerError, SPError
from sp_scan.wallet import OutputFound, OutputRolledBack, OutputSpent, UnconfirmedArrived, UnconfirmedLeft, Wallet, WalletEvent, sources


def line(event: WalletEvent) -> str | None:
    """The line an event prints, or None for one the shop does not show."""
    if not hasattr(event, "output"):
        return None  # the wallet's own sends
    o = event.output
    coin = f"{o.txid32[::-1].hex()}:{o.vout}"
    if isinstance(event, OutputFound):
        return f"paid {coin} {o.amount} at {o.height}" + ("" if o.verified else " unverified")
    if isinstance(event, OutputRolledBack):
        return f"reversed {coin} {o.amount}"
    if isinstance(event, UnconfirmedArrived):
        return f"unconfirmed {coin} {o.amount}"
    if isinstance(event, UnconfirmedLeft) and event.reason != "confirmed":
        return f"dropped {coin} {o.amount} {event.reason}"
    if isinstance(event, OutputSpent):
        return f"spent {coin} at {o.spent_height}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wallet", help="the wallet file")
    parser.add_argument("--blindbit", required=True, metavar="URL", help="a BlindBit Oracle v1 server, http://HOST:PORT")
    parser.add_argument("--mempool-from", metavar="SOURCE", help="a source with a mempool: an index file, or tcp://HOST:PORT (Frigate)")
    parser.add_argument("--verify-with", metavar="URL", help="prove BlindBit's outputs: a node's REST (http://) or an Electrum server (tcp://, ssl://)")
    parser.add_argument("--interval", type=float, default=10.0, metavar="S", help="seconds between rounds")
    args = parser.parse_args(argv)
    scan_key32 = bytes.fromhex(os.environ.get("SP_SCAN_KEY") or sys.stdin.readline().strip())
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    def show(event: WalletEvent) -> None:
        text = line(event)
        if text is not None:
            print(text, flush=True)

    try:
        with contextlib.ExitStack() as opened:
            wallet = opened.enter_context(Wallet.open(args.wallet))
            blindbit = opened.enter_context(sources.open(args.blindbit))
            prover = opened.enter_context(sources.open_prover(args.verify_with)) if args.verify_with else None
            mempool = opened.enter_context(sources.open(args.mempool_from)) if args.mempool_from else None
            wallet.listen(show)
            while not stop.is_set():
                try:
                    wallet.sync(blindbit, scan_key32, verify_with=prover, cancel=stop)
                    if mempool is not None:
                        wallet.sync(mempool, scan_key32, mempool=True, cancel=stop)
                except ServerError as exc:  # a server down or behind: the next round tries again
                    print(f"merchant: {exc}", file=sys.stderr, flush=True)
                stop.wait(args.interval)
    except SPError as exc:
        print(f"merchant: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
