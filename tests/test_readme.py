"""The README stays true: its two commands come first, and every example runs as pasted on the shipped samples.

A ```sh line whose trailing comment starts with "needs" (`# needs a node`) needs a node or a server and is
not run; every other line of every ```sh block after the first, and every ```python block, runs in order
from a directory holding a copy of the samples it names, as a user pasting them one after the other would.
`sp-scan` lines run in this process (shlex words, globs expanded as the shell would); other lines in bash.
"""

from __future__ import annotations

import glob
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import ROOT
from sp_scan import cli

README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
PEER = re.compile(r"\s#\s*needs\b[^#]*$")
"""A trailing comment saying what the line needs that the samples are not: a node or a server."""
PEER_OPTIONS = ("--rest", "--rpc", "--blocks-dir", "--blindbit", "--grpc", "--cake", "--electrum", "--dask", "--mempool")
SHELL = set("|&;<>$`(){}\\")
"""Characters that make a line more than words and globs: such a line runs in bash."""
INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev,dist]' && sp-scan "


def fences() -> list[tuple[str, str, int]]:
    """Every fenced block of the README: (language, text, line number of its first line)."""
    text = README.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1) for m in FENCE.finditer(text)]


def examples() -> list[tuple[str, str, str]]:
    """(kind, code, where) of every example to run, in README order: "sh" lines and "python" blocks."""
    out = []
    for lang, text, first in fences()[1:]:
        if lang == "python":
            out.append(("python", text, f"README.md:{first}"))
        elif lang == "sh":
            for n, line in enumerate(text.splitlines(), first):
                if line.strip() and not line.lstrip().startswith("#") and not PEER.search(line):
                    out.append(("sh", line, f"README.md:{n}"))
    return out


def peer_lines() -> list[str]:
    return [line for lang, text, _ in fences()[1:] if lang == "sh" for line in text.splitlines() if PEER.search(line)]


def sp_scan(line: str) -> tuple[int, str]:
    """Run an `sp-scan` line in this process, in the current directory: (exit code, stdout + stderr)."""
    words = []
    for word in shlex.split(line, comments=True)[1:]:
        matches = sorted(glob.glob(word)) if set(word) & set("*?[") else []
        words += matches or [word]
    clean = {k: None for k in ("SP_SCAN_KEY", "SP_SCAN_SPEND_PUBKEY", "SP_SCAN_RPC_PASSWORD", "SP_SCAN_SPEND_KEY")}
    result = CliRunner().invoke(cli.app, words, env=clean)
    return result.exit_code, result.output + (f"\n{result.exception!r}" if result.exit_code not in (0, 2) else "")


def bash(line: str) -> tuple[int, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def python(code: str, where: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(code, where, "exec"), {"__name__": "__readme__"})
    return 0, out.getvalue()


@pytest.fixture()
def samples(tmp_path, monkeypatch):
    """A directory holding a copy of each vectors/ folder the examples name, made the current one."""
    for name in sorted(set(re.findall(r"vectors/(\w+)/", "\n".join(code for _, code, _ in examples())))):
        shutil.copytree(ROOT / "vectors" / name, tmp_path / "vectors" / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_starts_with_the_install_and_scan_command_then_the_test_command():
    text = README.read_text()
    lang, block, _ = fences()[0]
    assert text.startswith("# sp-scan\n\n```sh\n") and lang == "sh"
    install, tests = block.splitlines()
    assert install.startswith(INSTALL) and tests == "python -m pytest"


def test_the_readme_stays_a_page_a_user_reads():
    assert len(README.read_text().splitlines()) <= 300


def test_the_readme_quickstart_prints_the_sample_blocks_expected_outputs(monkeypatch):
    monkeypatch.chdir(ROOT)
    line = fences()[0][1].splitlines()[0].removeprefix(INSTALL[: -len("sp-scan ")])
    code, output = sp_scan(line)
    assert code == 0, output
    expected = json.loads((ROOT / "vectors" / "blocks" / "small.expected.json").read_text())["found"]
    header, *rows = [r.split() for r in output.splitlines()]
    assert header == ["TXID", "VOUT", "AMOUNT", "LABEL", "OUTPUT", "TWEAK"]
    got = [{"txid": r[0], "vout": int(r[1]), "amount": int(r[2]), "output": r[4], "label": None if r[3] == "-" else int(r[3])} for r in rows]
    assert got == [{k: f[k] for k in ("txid", "vout", "amount", "output", "label")} for f in expected]
    code, output = sp_scan(line + " --json")
    assert code == 0 and [{k: r[k] for k in got[0]} for r in map(json.loads, output.splitlines())] == got


def test_every_example_that_needs_no_peer_runs_as_pasted_on_the_shipped_samples(samples):
    ran = []
    for kind, code, where in examples():
        if kind == "python":
            status, output = python(code, where)
        elif code.startswith("sp-scan ") and not set(code.partition(" #")[0]) & SHELL:
            status, output = sp_scan(code)
        else:
            status, output = bash(code)
        assert status == 0, f"{where}: {code}\nexit {status}:\n{output}"
        ran.append(code.split()[:3])
    assert ["sp-scan", "index", "sync"] in ran and ["sp-scan", "psbt", "extract"] in ran and len(ran) >= 20


def test_a_line_marked_as_needing_a_peer_names_one():
    lines = peer_lines()
    assert lines
    for line in lines:
        words = shlex.split(line, comments=True)
        assert any(w in PEER_OPTIONS for w in words) or words[0] == "curl" or words[:2] == ["sp-scan", "serve"], line


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md", ROOT / "fuzz" / "README.md"]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_the_pages_reaches_a_file_and_heading_that_exist(page):
    text = FENCE.sub("", page.read_text())
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"\w+://", target):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if fragment:
            headings = re.findall(r"^#+ (.*)$", FENCE.sub("", linked.read_text()), re.M)
            assert fragment in {anchor(h) for h in headings}, f"{page.name}: {target}"
