"""The in-memory cluster state: the only shared mutable object (changed by ``apply``)."""
