"""karpy: a Karpenter-compatible Kubernetes node autoscaler with a what-if simulator.

The public surface is the command line (``karpy``, :mod:`karpy.cli`) and the pure entry
points re-exported here: :func:`solve` (one provisioning simulation over a snapshot) and
:func:`disrupt` (one disruption pass), loaded on first use so that importing the command line
does not load the core. Everything else is imported by module.
"""

from karpy import native

native.install()  # before the core loads: its compiled build runs only when it matches the source

__all__ = ["__version__", "disrupt", "solve"]

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    if name == "solve":
        from karpy.core.scheduling import solve

        return solve
    if name == "disrupt":
        from karpy.core.disruption import compute

        return compute
    raise AttributeError(f"module 'karpy' has no attribute {name!r}")
