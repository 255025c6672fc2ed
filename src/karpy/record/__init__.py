"""``karpy record`` and ``karpy backtest``: a cluster's workload and nodes recorded as a trace, replayed.

The pure parts turn what was observed into a :class:`~karpy.record.model.Recording`
(:mod:`karpy.record.recorder`: watch events on an injected clock), hash its names
(:mod:`karpy.record.anonymize`) and write it as a ``kind: Simulation`` trace
(:mod:`karpy.record.writer`); :mod:`karpy.record.live` watches a cluster through the kube adapter,
and :mod:`karpy.record.backtest` replays a trace through the simulator and compares. See
``docs/backtest.md``.
"""
