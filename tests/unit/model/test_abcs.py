"""Resources and Requirements keep ABC state of their own, compiled or not."""

from __future__ import annotations

from collections.abc import Mapping

from karpy.model.abcs import own_abc_state
from karpy.model.requirements import Requirements
from karpy.model.resources import Resources


def test_a_dict_is_never_taken_for_one_of_karpys_mappings() -> None:
    assert isinstance({}, Mapping)  # fills Mapping's own cache with dict first
    assert not isinstance({"cpu": 1}, Resources)
    assert not isinstance({}, Requirements)
    assert isinstance(Resources({"cpu": 1}), Mapping) and isinstance(Requirements(), Mapping)
    assert isinstance(Resources(), Resources) and isinstance(Requirements(), Requirements)


def test_own_abc_state_leaves_a_class_with_its_own_state_alone() -> None:
    before = Resources.__dict__["_abc_impl"]
    own_abc_state(Resources)
    assert Resources.__dict__["_abc_impl"] is before
