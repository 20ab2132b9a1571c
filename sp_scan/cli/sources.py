"""Block sources for the CLI: files (with spent outputs beside them or via --spent) and node ranges.

A source is a small picklable value with a `name` and `load()` ->
(block_bytes, spent_bytes), so worker processes can fetch and parse too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sp_scan import formats
from sp_scan.errors import PrevoutsError
from sp_scan.node import RestNode, RpcNode

MISSING_PREVOUTS = (
    "no prevouts for {name}: pass --spent FILE (Core's spenttxouts .bin/.hex/.json or getblock-3 JSON), "
    "put {stem}.spent.hex or {stem}.spent.bin beside it, give getblock-3 JSON as BLOCK, or use --rest/--rpc"
)
_SUFFIXES = (".hex", ".bin", ".json")


@dataclass(frozen=True)
class FileBlock:
    """A block file: binary, hex or getblock-3 JSON, with its spent outputs' file if separate."""

    path: str
    spent_path: str | None

    @property
    def name(self) -> str:
        return self.path

    def load(self) -> tuple[bytes, bytes]:
        raw, inline = formats.load_block(Path(self.path).read_bytes())
        if self.spent_path is not None:
            return raw, formats.load_spent(Path(self.spent_path).read_bytes())
        if inline is None:
            raise PrevoutsError(MISSING_PREVOUTS.format(name=self.path, stem=_stem(self.path)))
        return raw, inline


@dataclass(frozen=True)
class NodeBlock:
    """The active chain's block at `height` on a node."""

    node: RestNode | RpcNode
    height: int

    @property
    def name(self) -> str:
        return f"block {self.height}"

    def load(self) -> tuple[bytes, bytes]:
        return self.node.block(self.node.block_hash(self.height))


def _stem(path: str) -> str:
    for suffix in _SUFFIXES:
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


def beside(path: str) -> str | None:
    """The spent-outputs file next to a block file (`x.hex` -> `x.spent.hex`, `.bin`, `.json`), if any."""
    stem = _stem(path)
    for suffix in _SUFFIXES:
        candidate = stem + ".spent" + suffix
        if Path(candidate).is_file():
            return candidate
    return None


def file_blocks(paths: tuple[str, ...], spent: str | None) -> list[FileBlock]:
    """Pair each block file with its spent outputs: --spent, the file beside it, or JSON inside it.

    Raises:
        PrevoutsError: a block has no prevouts anywhere (checked before any block is read).
        OSError: a file cannot be opened.
    """
    out = []
    for path in paths:
        spent_path = spent if spent is not None else beside(path)
        if spent_path is None and not _starts_like_json(path):
            raise PrevoutsError(MISSING_PREVOUTS.format(name=path, stem=_stem(path)))
        out.append(FileBlock(path, spent_path))
    return out


def _starts_like_json(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(64).lstrip()[:1] == b"{"


def node_blocks(node: RestNode | RpcNode, start: int, stop: int | None) -> list[NodeBlock]:
    """The blocks at heights start..stop inclusive; stop None is the node's tip."""
    stop = node.tip_height() if stop is None else stop
    return [NodeBlock(node, h) for h in range(start, stop + 1)]
