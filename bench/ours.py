"""sp-scan's own implementations, by backend.

Each stage module keeps the pure-Python code as `<name>_reference` once the native
backend is wired (the public name is then native); before that only the public name
exists and it is the reference. `impls` answers both states.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from sp_scan import native


def native_enabled() -> bool:
    return bool(getattr(native, "ENABLED", False))


def impls(module: ModuleType, name: str) -> dict[str, Callable]:
    """{"native": f, "reference": f} for `module.name`, "native" only when the backend is enabled."""
    public = getattr(module, name)
    reference = getattr(module, f"{name}_reference", public)
    out = {"reference": reference}
    if native_enabled() and public is not reference:
        out["native"] = public
    return out


def native_attr(name: str) -> Callable | None:
    """A function of the native door (`sp_scan.native.<name>`), or None when disabled or absent."""
    return getattr(native, name, None) if native_enabled() else None
