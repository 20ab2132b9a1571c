"""sp-scan's own implementations, by backend.

The stage modules (`sp_scan.extract`, `scan`, `block`, ...) take their functions from
`sp_scan.backend`: native when the C extension is enabled, else the reference. The reference
stays importable beside them as `sp_scan.reference.<stage>`; `impls` answers both.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from sp_scan import native


def native_enabled() -> bool:
    return bool(getattr(native, "ENABLED", False))


def reference_of(module: ModuleType, name: str) -> Callable:
    """The pure-Python `name` of a stage module: `sp_scan.reference.<stage>.<name>`."""
    stage = module.__name__.rsplit(".", 1)[-1]
    return getattr(importlib.import_module(f"sp_scan.reference.{stage}"), name)


def impls(module: ModuleType, name: str) -> dict[str, Callable]:
    """{"native": f, "reference": f} for `module.name`, "native" only when the backend is enabled."""
    public, reference = getattr(module, name), reference_of(module, name)
    out = {"reference": reference}
    if native_enabled() and public is not reference:
        out["native"] = public
    return out


def native_attr(name: str) -> Callable | None:
    """A function of the native door (`sp_scan.native.<name>`), or None when disabled or absent."""
    return getattr(native, name, None) if native_enabled() else None
