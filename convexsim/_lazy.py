"""Lazy package attributes (PEP 562): a package's public names imported from their submodules on first use.

Used by ``convexsim.sap`` and ``convexsim.stepping`` so that importing one submodule (e.g. a compiled
kernel module) does not import every sibling and its numba kernels."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_attributes(package: str, table: Mapping[str, str],
                    namespace: dict) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) for ``package`` whose public names map to submodules in ``table``
    (name -> submodule); a resolved name is stored in ``namespace`` (the package's globals) so it is
    looked up only once."""

    def __getattr__(name: str):
        sub = table.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{sub}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__


__all__ = ["lazy_attributes"]
