"""Plain values of karpy's domain: quantities, resources, requirements, taints, objects, catalogs.

Pure and dependency-free: no I/O, no clock, no third-party imports. Everything above
(``api``, ``core``, ``state`` ...) builds on these values.
"""
