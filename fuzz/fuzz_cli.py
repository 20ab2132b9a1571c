"""Fuzz the CLI on random files: exit 0, or exit 2 with one `sp-scan: error:` line; stdout stays JSON Lines.

    python fuzz/fuzz_cli.py -max_total_time=300

Input: one command byte (tweaks / scan / extract / bare BLOCK), then the block file and the spent
file's bytes separated by the first b"\\n--\\n" (no separator: the sample spent outputs).
"""

import json
import os
import tempfile
from pathlib import Path

import atheris
from _harness import ROOT, run

with atheris.instrument_imports(include=["sp_scan"]):
    from click.testing import CliRunner
    from sp_scan import cli as CLI

BLOCKS = ROOT / "vectors" / "blocks"
WALLET = json.loads((BLOCKS / "small.expected.json").read_text())["wallet"]
SCAN_HEX = (BLOCKS / WALLET["scan_key_file"]).read_text().strip()
SMALL_SPENT_HEX = (BLOCKS / "small.spent.hex").read_bytes()
DIR = Path(tempfile.mkdtemp(prefix="sp-scan-fuzz-cli-"))
COMMANDS = [["tweaks"], ["scan"], ["extract"], []]
ENV = {"SP_SCAN_KEY": SCAN_HEX, "SP_SCAN_SPEND_PUBKEY": WALLET["spend_pubkey"], "SP_SCAN_RPC_PASSWORD": None}


def test_one(data: bytes) -> None:
    command = COMMANDS[data[0] % 4] if data else []
    block_bytes, sep, spent_bytes = data[1:].partition(b"\n--\n")
    (DIR / "b.hex").write_bytes(block_bytes)
    (DIR / "b.spent.hex").write_bytes(spent_bytes if sep else SMALL_SPENT_HEX)
    result = CliRunner().invoke(CLI.app, [*command, str(DIR / "b.hex"), "--json"], env=ENV)
    assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output and SCAN_HEX not in result.output
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("sp-scan: error: "), result.stderr
    for line in result.stdout.splitlines():
        json.loads(line)


if __name__ == "__main__":
    os.environ.pop("SP_SCAN_BACKEND", None)
    small = (BLOCKS / "small.hex").read_bytes()
    run("cli", test_one, [bytes([c]) + small for c in range(4)] + [b"\x01" + small + b"\n--\n" + SMALL_SPENT_HEX[:-9]])
