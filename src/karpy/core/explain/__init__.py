"""Answers to "why": why a pod is (not) placed, why a node is (not) disrupted.

Pure functions of a :class:`~karpy.core.snapshot.Snapshot`, built on the very solve and
disruption pass the controllers run (:mod:`.pod`, :mod:`.node`); :mod:`.reasons` names the
predicate behind each of the solver's messages. Rendered by ``karpy explain`` and written as
Events and metrics by the operator.
"""
