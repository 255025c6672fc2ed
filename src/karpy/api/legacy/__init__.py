"""Karpenter's legacy APIs read as v1: v1alpha5 Provisioner, v1alpha1 AWSNodeTemplate, v1beta1
NodePool / NodeClaim / EC2NodeClass.

Raw legacy documents become raw ``karpenter.sh/v1`` / ``karpenter.k8s.aws/v1`` documents
(:mod:`~karpy.api.legacy.convert`), field by field, with a warning for each field that has no
v1 equivalent; :mod:`karpy.api.load` then validates them with the v1 schemas (errors name the
legacy field) and ``karpy convert`` writes them out. See docs/convert.md.
"""
