"""Weight versions, `<incarnation>:<sequence>`: the incarnation is minted once per runtime start, and the
sequence counts the weight sets swapped in since. Every generated token is stamped with one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import torch


class WeightVersion:
    """The version of the weights currently serving. Only the generation thread changes it."""

    def __init__(self) -> None:
        self.incarnation = uuid.uuid4().hex
        self.sequence = 0

    def __str__(self) -> str:
        return f"{self.incarnation}:{self.sequence}"

    def bump(self) -> str:
        self.sequence += 1
        return str(self)


def copy_weights(model: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy a full or partial state dict into the serving model, casting to its dtype; unknown names are refused.

    Names are checked before anything is copied, so a refused swap leaves the serving weights untouched.
    """
    params: dict[str, torch.Tensor] = dict(model.named_parameters(remove_duplicate=False))
    params.update(model.named_buffers(remove_duplicate=False))
    unknown = sorted(set(state) - set(params))
    if unknown:
        raise KeyError(f"the model has no weights named {', '.join(unknown[:5])}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(params[name].shape):
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, the model's is {tuple(params[name].shape)}")
    with torch.no_grad():
        for name, tensor in state.items():
            params[name].copy_(tensor)
