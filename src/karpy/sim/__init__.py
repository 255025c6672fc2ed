"""The simulator: the same controllers on a virtual loop, an in-memory API server and cloud.

So far: :mod:`karpy.sim.binder` (the kube-scheduler stand-in) and :mod:`karpy.sim.workloads`
(Deployment/ReplicaSet, Job, pod-GC and kubelet stand-ins).
"""
