"""Locate bundled files (prompts, sample data) in a checkout or an installed wheel."""

from __future__ import annotations

from pathlib import Path

from lifesearch_local.errors import LifesearchError

_PKG = Path(__file__).resolve().parent


def resource_path(*parts: str) -> Path:
    """Path of a bundled file: inside the wheel (`_resources/`) or at the checkout's top level."""
    for base in (_PKG / "_resources", _PKG.parent):
        p = base.joinpath(*parts)
        if p.exists():
            return p
    raise LifesearchError(f"bundled file {'/'.join(parts)} not found (is the package installed completely?)")
