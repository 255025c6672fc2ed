"""The package's public names are exactly what ``__all__`` says (httpx-style); the entry points
are loaded on first use (so that importing the command line does not load the core)."""

from __future__ import annotations

import types

import karpy


def test_public_names() -> None:
    public = sorted(
        name
        for name, value in vars(karpy).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    )
    assert set(public) <= set(karpy.__all__)
    assert callable(karpy.solve) and callable(karpy.disrupt)
    loaded = sorted(
        name
        for name, value in vars(karpy).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "__getattr__"
    )
    assert sorted([*{*loaded, "solve", "disrupt"}, "__version__"]) == sorted(karpy.__all__)
    try:
        karpy.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
