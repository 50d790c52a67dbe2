"""Weight versions, `<incarnation>:<sequence>`. The incarnation is a fingerprint of the weights as loaded, so a
restart with the same weights gives them the same version (`<fingerprint>:0`); the sequence counts the weight sets
swapped in since. A sequence number is never used twice for one fingerprint on this machine (the last one is kept
in a small file in the user's cache), so a version names one weight set across restarts too. Every generated token
is stamped with one.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path

import torch

from reef_daemon.runtimes.model_cache import user_model_cache

log = logging.getLogger("reef.embedded")


def fingerprint(model: torch.nn.Module) -> str:
    """A hash of the model's parameters (names, shapes, dtypes and values): the same weights, the same hash."""
    digest = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters(), key=lambda item: item[0]):
            tensor = parameter.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{name}|{tuple(parameter.shape)}|{tensor.dtype};".encode())
            digest.update(tensor.view(torch.uint8).numpy().data)
    return digest.hexdigest()


def sequence_ledger(incarnation: str) -> Path:
    """The file that keeps the last sequence number used for weights with this fingerprint."""
    return user_model_cache().parent / "weight-versions" / incarnation


class WeightVersion:
    """The version of the weights currently serving. Only the generation thread changes it."""

    def __init__(self, incarnation: str, ledger: Path | None = None) -> None:
        self.incarnation = incarnation
        self.sequence = 0
        self._ledger = ledger or sequence_ledger(incarnation)

    def __str__(self) -> str:
        return f"{self.incarnation}:{self.sequence}"

    def bump(self) -> str:
        """The next version: past the last one this machine used for these weights, in any run."""
        try:
            self.sequence = _claim_after(self._ledger, self.sequence)
        except OSError as exc:  # a read-only cache: numbers stay unique within this run only
            log.warning("cannot keep weight version numbers in %s: %s", self._ledger, exc)
            self.sequence += 1
        return str(self)


def _claim_after(ledger: Path, current: int) -> int:
    """Take the number after both `current` and the ledger's, and write it down, under a lock."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with ledger.open("a+", encoding="ascii") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        text = file.read().strip()
        claimed = max(current, int(text) if text.isdigit() else 0) + 1
        file.seek(0)
        file.truncate()
        file.write(f"{claimed}\n")
    return claimed


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
