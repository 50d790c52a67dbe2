"""The torch trainer's device: a CUDA GPU when one is visible (auto), refused with what to install when asked for
and absent."""

from __future__ import annotations

import pytest
import torch

from recipes.sao.trainer import training_device
from reef_daemon.setting_kinds import SettingsError


def test_auto_is_cuda_exactly_when_a_gpu_is_visible() -> None:
    assert training_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert training_device("cpu").type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible here")
def test_cuda_without_a_gpu_is_refused_with_what_to_install() -> None:
    with pytest.raises(
        SettingsError, match=r"training\.device = cuda, but torch sees no CUDA GPU.*CUDA build of torch"
    ):
        training_device("cuda")
