"""The Kubernetes edge: the only package that imports ``kubernetes_asyncio``.

- :mod:`~karpy.adapters.kube.client`: ``KubeClient`` (the ``KubeAPI`` port, raw JSON) and the
  edge thread running its asyncio loop;
- :mod:`~karpy.adapters.kube.watch`: list+watch per kind with resume, re-list on 410, backoff;
- :mod:`~karpy.adapters.kube.leader`: Lease leader election;
- :mod:`~karpy.adapters.kube.events`: ``events.k8s.io/v1`` event sink;
- :mod:`~karpy.adapters.kube.errors`: HTTP statuses → :mod:`karpy.model.errors`.
"""

from karpy.adapters.kube import client, errors, events, leader, watch

__all__ = ["client", "errors", "events", "leader", "watch"]
