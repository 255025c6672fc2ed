"""karpy: a Karpenter-compatible Kubernetes node autoscaler with a what-if simulator.

The public surface is the command line (``karpy``, :mod:`karpy.cli`) and the pure entry
points re-exported here: :func:`solve` (one provisioning simulation over a snapshot) and
:func:`disrupt` (one disruption pass). Everything else is imported by module.
"""

from karpy.core.disruption import compute as disrupt
from karpy.core.scheduling import solve

__all__ = ["__version__", "disrupt", "solve"]

__version__ = "0.1.0"
