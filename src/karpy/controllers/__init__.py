"""Reconcilers: read the cluster state, call the core, write through the ports."""
