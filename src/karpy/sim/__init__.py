"""The what-if simulator: karpy's real controllers (or a Cluster Autoscaler model) on a
virtual clock, with an in-memory API server, a kube-scheduler stand-in, workload stand-ins
and a simulated cloud; ``runner.run`` drives one scenario, ``report`` renders the results.
"""
