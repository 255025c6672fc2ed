"""The Kubernetes edge: the in-memory API server (tests, simulator) and, later, the real client."""
