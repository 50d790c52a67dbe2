"""Weight versions, `<incarnation>:<sequence>`. The incarnation is a fingerprint of the weights as loaded, so a
restart with the same weights gives them the same version (`<fingerprint>:0`); the sequence counts the weight sets
swapped in since. A sequence number is never used twice for one fingerprint on this machine (the last one is kept
in a small file in the user's cache), so a version names one weight set across restarts too. Every generated token
is stamped with one.

The torch engine fingerprints the tensors it holds (`fingerprint`); the sglang engine, whose weights live in another
process, fingerprints the checkpoint files the server loaded (`fingerprint_files`). Where neither can be read, a
`random-` incarnation names the weights of one run only, and its numbers are kept in no file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from reef_contract import WeightVersion
from reef_daemon.runtimes.model_cache import user_model_cache

log = logging.getLogger("reef.embedded")

RANDOM_PREFIX = "random-"
SAMPLE_BYTES = 4096  # read at the start, middle and end of every tensor of a checkpoint file


def fingerprint(model: torch.nn.Module) -> str:
    """A hash of the model's parameters (names, shapes, dtypes and values): the same weights, the same hash."""
    digest = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters(), key=lambda item: item[0]):
            tensor = parameter.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{name}|{tuple(parameter.shape)}|{tensor.dtype};".encode())
            digest.update(tensor.view(torch.uint8).numpy().data)
    return digest.hexdigest()


def fingerprint_files(folder: Path) -> str:
    """A hash of the safetensors checkpoint in `folder`, cheap for checkpoints of many GB: each file's name, size
    and header (every tensor's name, dtype, shape and offsets) whole, and of each tensor's bytes three windows of
    SAMPLE_BYTES (start, middle, end; a small tensor whole). A trained tensor changes in all its elements, so its
    windows change too. OSError or ValueError when the folder holds no readable checkpoint."""
    if not folder.is_dir():
        raise OSError("no such folder")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise OSError("it holds no safetensors files")
    digest = hashlib.blake2b(digest_size=16)
    for path in files:
        with path.open("rb") as file:
            size = path.stat().st_size
            length = int.from_bytes(file.read(8), "little")
            if not 0 < length <= size - 8:
                raise ValueError(f"{path} is not a safetensors file")
            header_bytes = file.read(length)
            header = json.loads(header_bytes)
            digest.update(f"{path.name}|{size}|".encode())
            digest.update(header_bytes)
            for name in sorted(header):
                if name == "__metadata__":
                    continue
                start, end = (8 + length + int(offset) for offset in header[name]["data_offsets"])
                for offset, count in _windows(start, end):
                    file.seek(offset)
                    digest.update(file.read(count))
    return digest.hexdigest()


def _windows(start: int, end: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of the bytes of a tensor stored in [start, end) that the fingerprint reads."""
    if end - start <= 3 * SAMPLE_BYTES:
        yield start, end - start
        return
    middle = start + (end - start) // 2 - SAMPLE_BYTES // 2
    for offset in (start, middle, end - SAMPLE_BYTES):
        yield offset, SAMPLE_BYTES


def random_incarnation() -> str:
    """An incarnation for weights that cannot be fingerprinted: it names this run's weights only."""
    return f"{RANDOM_PREFIX}{uuid.uuid4().hex}"


def sequence_ledger(incarnation: str) -> Path:
    """The file that keeps the last sequence number used for weights with this fingerprint."""
    return user_model_cache().parent / "weight-versions" / incarnation


class ServingVersion:
    """The version of the weights currently serving, and the next one a swap claims. Only the generation thread
    changes it."""

    def __init__(self, incarnation: str, ledger: Path | None = None) -> None:
        self.incarnation = incarnation
        self.sequence = 0
        self._ledger: Path | None = None
        if not incarnation.startswith(RANDOM_PREFIX):  # a random one never comes back: no number to keep
            self._ledger = ledger or sequence_ledger(incarnation)

    def __str__(self) -> str:
        return str(WeightVersion(self.incarnation, self.sequence))

    def bump(self) -> str:
        """The next version: past the last one this machine used for these weights, in any run."""
        if self._ledger is None:
            self.sequence += 1
            return str(self)
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
