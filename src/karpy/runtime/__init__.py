"""Who calls ``reconcile()`` and when: the loop that owns time, and the wiring."""
