"""A weight version is read one way wherever it is read: the runtime's next swap, a rollout's staleness and the
SGLang engine's labels all parse `INCARNATION:SEQUENCE` with the contract's `WeightVersion`."""

from __future__ import annotations

import pytest

from recipes.sao.rollout import sequence_lag
from reef_contract import WeightVersion


def test_a_version_reads_back_as_it_was_written() -> None:
    version = WeightVersion("random-3f2a:b", 7)  # an incarnation may hold ':' itself; the last one separates
    assert str(version) == "random-3f2a:b:7"
    assert WeightVersion.parse(str(version)) == version


@pytest.mark.parametrize("text", ["", "abc", ":5", "weights:", "weights:-1", "weights:1.5", "weights:\uff15"])
def test_text_that_names_no_version_is_none(text: str) -> None:
    assert WeightVersion.parse(text) is None


def test_staleness_counts_swaps_of_the_same_weights_only() -> None:
    assert sequence_lag("w:3", "w:7") == 4
    assert sequence_lag("other:3", "w:7") is None
    assert sequence_lag("w:x", "w:7") is None
