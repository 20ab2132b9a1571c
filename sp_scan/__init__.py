"""sp-scan: Silent Payments (BIP352) scanning, sending and addresses.

Where things live (layers lowest first; `tests/test_layout.py` holds every import to them):

    errors, network        typed errors; the one table of networks (chain names, hrp, key family, proof-of-work
                           rules and checkpoint)
    crc                    the CRC-32 of stored values both SQLite stores (index, wallet) check their rows with
    sqlitefile             both stores' file life: made aside and linked into place, opened with checks, the
                           portable writer lock
    workers                worker processes that answer in order and stop at once; `signals_held`
    crypto, _checks        BIP352 constants and primitives; argument checks both backends share
    types, wire            values passed between stages (Receiver, Summary, …); Bitcoin serialization
    headers                block headers checked as Core checks them (proof of work, retargets, checkpoint)
    formats, address       Core's hex/JSON forms of blocks and prevouts; sp1/tsp1/sprt1 addresses
    proto/                 BlindBit Oracle v2's messages and their generated module
    native/                the C extensions and their one Python door (`native/__init__.py`);
                           `_testing.py` the test-only door to `_testcore` (engine hooks, emulated IFMA)
    reference/             the same stages in readable Python: extract, summary, scan, send, dleq,
                           block (the block loop), filters (BIP158 sets)
    backend                picks native or reference once; the stage modules below take their functions here
    extract, summary, scan, send, dleq, block    the public stages
    psbt/                  BIP375: fields, codec, inputs, rules, roles; BIP376 spend (sign, finalize); tx
                           (the transaction a PSBT describes, extraction)
    descriptor, node       sp() descriptors (BIP392/393); Core's REST and RPC clients
    index/                 the tweak index: tweak_index (`Index`, the API), store (SQL), sync (node ->
                           store), corefiles (Core's block files), scan, filters, cluster, mempool (the
                           node's mempool beside the index)
    wallet/                the receiving wallet: store (SQL), sync (checks, scans, commits), sources/ (one
                           per source behind one interface: index, node, blindbit, blindbit_v2, electrum
                           with frigate and cake), spend (coin selection, fees, the PSBT), broadcast
    server/                `sp-scan serve`: http (HTTP/1.x on llhttp), app + routes (BlindBit v1),
                           answers (built once, cached), v2 (BlindBit v2 gRPC), limits (one per-IP and
                           total gate for every listener), status (/status, /metrics), service
                           (listeners + the sync beside them)
    server/electrum/       the Electrum listener: session + rpc (JSON-RPC on aiorpcx), frigate (Sparrow's
                           methods), cake (Cake's tweak methods), passes (shared scans for subscribers,
                           on this machine or a Dask cluster),
                           proxy (the backend Electrum server), caps (subscription caps)
    cli/                   `sp-scan`: the group (__init__), one module per command (blocks, address,
                           index, wallet, serve, electrum, interop), options (options, secrets, node,
                           wallet), cluster (the --dask options), sources, run, output, wallets (the
                           `--wallets` file)
"""
