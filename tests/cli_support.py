"""Test support for the CLI: importing it from the source tree, and local Core-like HTTP servers."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_cli():
    """Import sp_scan.cli; from a source checkout, map cli/ to it as pyproject.toml does."""
    try:
        return importlib.import_module("sp_scan.cli")
    except ModuleNotFoundError:
        pass
    import sp_scan

    spec = importlib.util.spec_from_file_location("sp_scan.cli", ROOT / "cli" / "__init__.py", submodule_search_locations=[str(ROOT / "cli")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["sp_scan.cli"] = module
    spec.loader.exec_module(module)
    sp_scan.cli = module
    return module
