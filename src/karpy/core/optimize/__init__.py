"""Cost optimisation over a plan: the LP lower bound and the optimized re-packing.

:mod:`~karpy.core.optimize.bound` relaxes packing pods onto new nodes into a linear
programme whose optimum bounds the hourly cost of any node set that fits them (``karpy
plan --bound``); :mod:`~karpy.core.optimize.repack` re-packs a faithful plan's free pods
onto the LP's instance-type mix (``packing: optimized``), using :mod:`.greedy` to open
node configurations, :mod:`.pools` for per-NodePool instance-type arrays, :mod:`.packer`
to finalize and merge nodes, and :mod:`.limits` to apply NodePool limits.

Pure: no I/O, no clock. Used by :mod:`karpy.planning`.
"""
