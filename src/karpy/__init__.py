"""karpy: a Karpenter-compatible Kubernetes node autoscaler with a what-if simulator.

The public surface is the command line (``karpy``, :mod:`karpy.cli`) and the pure entry
points re-exported here: :func:`solve` (one provisioning simulation over a snapshot) and
:func:`disrupt` (one disruption pass). Everything else is imported by module.
"""

from karpy import native

native.install()  # before the core loads: its compiled build runs only when it matches the source

from karpy.core.disruption import compute as disrupt  # noqa: E402
from karpy.core.scheduling import solve  # noqa: E402

__all__ = ["__version__", "disrupt", "solve"]

__version__ = "0.1.0"
