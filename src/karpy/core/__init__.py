"""The pure decision core: functions of a :class:`~karpy.core.snapshot.Snapshot` (and ``now``).

No I/O, no clock, no Kubernetes or AWS imports (checked by import-linter and an AST test).
"""
