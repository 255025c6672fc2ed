"""``karpy sweep``: what-if sweeps of simulations (scenarios x configurations x parameter grid x seeds).

:mod:`~karpy.sweep.spec` reads the ``kind: Sweep`` file, :mod:`~karpy.sweep.expand` turns it into
runs with stable keys, :mod:`~karpy.sweep.task` is one run (what a worker executes),
:mod:`~karpy.sweep.execute` runs them on local processes (or on Ray, :mod:`~karpy.sweep.ray_backend`,
the only module importing ray) with one retry and resume from an output folder,
:mod:`~karpy.sweep.merge` makes the merged statistics and :mod:`~karpy.sweep.report` the HTML page.
See ``docs/sweep.md``.
"""
