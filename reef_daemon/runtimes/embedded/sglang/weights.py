"""New weights as a Hugging Face folder SGLang can load from disk: the serving folder with some tensors replaced.

A trainer hands over a full or partial state dict; every name must be a tensor of the serving checkpoint, with
the same shape (checked before anything is written, so a refused update changes nothing). Files without a
replaced tensor are linked, not copied; tensors keep the checkpoint's dtype.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

INDEX = "model.safetensors.index.json"


def tensor_files(folder: Path) -> dict[str, str]:
    """Tensor name -> the safetensors file (in `folder`) holding it."""
    index = folder / INDEX
    if index.is_file():
        mapping: dict[str, str] = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return dict(mapping)
    from safetensors import safe_open

    names: dict[str, str] = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            names.update(dict.fromkeys(handle.keys(), path.name))
    if not names:
        raise ValueError(f"{folder} holds no safetensors weights")
    return names


def write_updated(current: Path, state: Mapping[str, Any], target: Path) -> Path:
    """Write `target`: the checkpoint of `current` with the tensors of `state` replaced. Raises KeyError for a
    name the checkpoint lacks and ValueError for a shape that does not fit, before writing anything."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    files = tensor_files(current)
    unknown = sorted(set(state) - set(files))
    if unknown:
        raise KeyError(f"the served checkpoint has no weights named {', '.join(unknown[:5])}")
    changed: dict[str, list[str]] = {}
    for name in state:
        changed.setdefault(files[name], []).append(name)
    partial = target.with_name(f"{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for entry in current.iterdir():
            if entry.is_file() and entry.name not in changed:
                _link_or_copy(entry, partial / entry.name)
        for filename, names in changed.items():
            tensors: dict[str, Any] = {}
            with safe_open(str(current / filename), framework="pt") as handle:
                metadata = handle.metadata()
                for key in handle.keys():  # noqa: SIM118 - safe_open handles are not mappings
                    tensors[key] = handle.get_tensor(key)
            for name in names:
                new, old = state[name], tensors[name]
                if tuple(new.shape) != tuple(old.shape):
                    raise ValueError(f"{name} has shape {tuple(new.shape)}, the model's is {tuple(old.shape)}")
                tensors[name] = new.detach().to(device="cpu", dtype=old.dtype).contiguous()
            save_file(tensors, str(partial / filename), metadata=metadata)
        os.replace(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _link_or_copy(source: Path, destination: Path) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
