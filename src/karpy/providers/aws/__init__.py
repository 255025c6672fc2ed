"""The AWS provider: EC2NodeClass to running EC2 instances, as Karpenter's AWS provider does.

Behind the same :class:`~karpy.ports.CloudProvider` port as the kwok provider; used by
``karpy operator --provider aws`` (see ``docs/aws.md``). Only :mod:`.sdk` and :mod:`.errors`
import boto3/botocore; the other modules call AWS through the clients :mod:`.sdk` builds and
:func:`.errors.call`, or are pure (user data, drift, launch-template and fleet request shapes).
"""
