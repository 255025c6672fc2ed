"""The package's public names are exactly what ``__all__`` says (httpx-style)."""

from __future__ import annotations

import types

import karpy


def test_public_names() -> None:
    public = sorted(
        name
        for name, value in vars(karpy).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    )
    assert sorted(karpy.__all__) == sorted([*public, "__version__"])
    assert callable(karpy.solve) and callable(karpy.disrupt)
