"""LoRA adapters served beside the frozen base model: each scenario's own adapter, applied per row of a step.

An adapter holds, for each linear layer it targets, the low-rank pair A `[r, in]` and B `[out, r]` PEFT trains,
and the scale alpha / r; a targeted layer's output gains scale * B(A x). The tensors arrive named as PEFT saves them
(`base_model.model.<module>.lora_A.weight`), so what a trainer saves is what serves.

The generation thread keeps the resident adapters in an `AdapterBank` and, around each forward pass, says which
adapter each row of the batch uses (`serving`); a forward hook on every targeted layer adds each row's own delta.
A row's delta is computed on that row alone, so its tokens do not depend on the rows beside it, as for the base
layers. At most `capacity` adapters stay resident; the least recently used one beyond that is written to a
safetensors file of its own (`spill_dir`) and read back when a request of its scenario comes (its version is kept).
An adapter that cannot be spilled (the folder full or unwritable) or read back (its file corrupt or gone) is an
`AdapterUnavailable` for that swap or that scenario's request alone; the bank stays as it was and serves the others.
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

PEFT_PREFIX = "base_model.model."
_A, _B = ".lora_A.weight", ".lora_B.weight"


class AdapterUnavailable(RuntimeError):
    """An adapter could not be spilled to disk or read back from it; the message names the scenario, the file and
    why."""


@dataclass(frozen=True)
class LoraAdapter:
    """One scenario's adapter as it serves: per targeted module path, (A, B); the scale; the version it serves as."""

    scenario: str
    version: str
    scale: float
    layers: Mapping[str, tuple[torch.Tensor, torch.Tensor]]

    @property
    def nbytes(self) -> int:
        """The memory its tensors take."""
        return sum(a.numel() * a.element_size() + b.numel() * b.element_size() for a, b in self.layers.values())


def lora_layers(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """PEFT-named adapter tensors as (A, B) per module path of the served model; ValueError for a name that is
    not a LoRA matrix or a module with only one of its pair."""
    halves: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in state.items():
        path = name.removeprefix(PEFT_PREFIX)
        for suffix, half in ((_A, "A"), (_B, "B")):
            if path.endswith(suffix):
                halves.setdefault(path.removesuffix(suffix), {})[half] = tensor.detach().to("cpu", torch.float32)
                break
        else:
            raise ValueError(f"{name} is not a LoRA matrix (…lora_A.weight or …lora_B.weight)")
    layers = {}
    for path, pair in halves.items():
        if set(pair) != {"A", "B"}:
            raise ValueError(f"the adapter's {path} has lora_{''.join(pair)} without its pair")
        a, b = pair["A"].contiguous(), pair["B"].contiguous()
        if a.shape[0] != b.shape[1]:
            raise ValueError(f"the adapter's {path}: lora_A {tuple(a.shape)} and lora_B {tuple(b.shape)} do not fit")
        layers[path] = (a, b)
    return layers


def write_peft_folder(folder: Path, state: Mapping[str, torch.Tensor], scale: float, base: str) -> None:
    """Write an adapter as PEFT saves one (`adapter_config.json`, `adapter_model.safetensors`), for a server that
    loads adapters from a folder; rank and target modules are read from the tensors, alpha = scale x rank."""
    layers = lora_layers(state)
    if not layers:
        raise ValueError("the adapter has no LoRA matrices")
    rank = int(next(iter(layers.values()))[0].shape[0])
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": rank,
        "lora_alpha": scale * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted({path.rsplit(".", 1)[-1] for path in layers}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_file(peft_tensors(layers), str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})


def peft_tensors(layers: Mapping[str, tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """(A, B) per module path as the tensors PEFT saves, the inverse of `lora_layers`."""
    tensors = {}
    for path, (a, b) in layers.items():
        tensors[f"{PEFT_PREFIX}{path}{_A}"], tensors[f"{PEFT_PREFIX}{path}{_B}"] = a, b
    return tensors


class AdapterBank:
    """The adapters the generation thread serves, by scenario; used by that thread only."""

    def __init__(self, model: torch.nn.Module, capacity: int, spill_dir: Path) -> None:
        self._model = model
        self._modules: dict[str, torch.nn.Module] = dict(model.named_modules())
        self._capacity = capacity
        self._spill_dir = spill_dir
        self._resident: OrderedDict[str, LoraAdapter] = OrderedDict()
        self._spilled: dict[str, tuple[str, float]] = {}  # scenario -> (version, scale) of an adapter on disk
        self._hooked: set[str] = set()
        self._rows: list[LoraAdapter | None] | None = None

    def check(self, layers: Mapping[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
        """ValueError when an adapter targets a module the model lacks, or one whose shape it does not fit."""
        for path, (a, b) in layers.items():
            module = self._modules.get(path)
            weight = getattr(module, "weight", None)
            if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
                raise ValueError(
                    f"the served model has no linear layer {path} for the adapter; training.lora-target-modules"
                    " names the layers an adapter may adapt"
                )
            if (b.shape[0], a.shape[1]) != tuple(weight.shape):
                raise ValueError(
                    f"the adapter's {path} is {b.shape[0]}x{a.shape[1]} and the served layer {tuple(weight.shape)}:"
                    " it was trained on another model"
                )

    def install(self, adapter: LoraAdapter) -> None:
        """Serve `adapter` for its scenario from the next forward pass; the least recently used spills if needed.
        AdapterUnavailable, the bank unchanged, when that one cannot be spilled."""
        self.check(adapter.layers)
        if adapter.scenario not in self._resident:
            self._make_room()
        for path in adapter.layers:
            if path not in self._hooked:
                self._modules[path].register_forward_hook(self._hook(path))
                self._hooked.add(path)
        self._spilled.pop(adapter.scenario, None)
        self._resident[adapter.scenario] = adapter
        self._resident.move_to_end(adapter.scenario)

    def get(self, scenario: str) -> LoraAdapter | None:
        """The scenario's adapter (read back from disk if it was spilled), or None: the base serves it.
        AdapterUnavailable when a spilled one cannot be read back, or another cannot be spilled to make room."""
        adapter = self._resident.get(scenario)
        if adapter is not None:
            self._resident.move_to_end(scenario)
            return adapter
        if scenario in self._spilled:
            self.install(self._read_back(scenario))
            return self._resident[scenario]
        return None

    def version(self, scenario: str) -> str | None:
        """The version of the scenario's adapter, resident or spilled; None without one."""
        if scenario in self._resident:
            return self._resident[scenario].version
        spilled = self._spilled.get(scenario)
        return spilled[0] if spilled else None

    @property
    def resident(self) -> list[str]:
        """The scenarios whose adapters are in memory, least recently used first."""
        return list(self._resident)

    @property
    def scenarios(self) -> list[str]:
        """Every scenario with an adapter, resident or spilled, by name."""
        return sorted({*self._resident, *self._spilled})

    def resident_bytes(self) -> int:
        """The memory the resident adapters' tensors take."""
        return sum(adapter.nbytes for adapter in self._resident.values())

    @contextlib.contextmanager
    def serving(self, rows: list[LoraAdapter | None]) -> Iterator[None]:
        """Inside the block, row `i` of a forward pass is served by `rows[i]` (None: the base alone)."""
        self._rows = rows if any(adapter is not None for adapter in rows) else None
        try:
            yield
        finally:
            self._rows = None

    def _hook(self, path: str) -> Any:
        def add_delta(_module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> Any:
            rows = self._rows
            if rows is None:
                return None
            x = inputs[0]
            for row, adapter in enumerate(rows):
                if adapter is None or (pair := adapter.layers.get(path)) is None:
                    continue
                a, b = pair
                delta = (x[row].to(torch.float32) @ a.T) @ b.T
                output[row] += (delta * adapter.scale).to(output.dtype)
            return output

        return add_delta

    def _make_room(self) -> None:
        """Spill the least recently used adapters until one more fits; each leaves memory only once it is on disk."""
        while len(self._resident) >= self._capacity:
            scenario, oldest = next(iter(self._resident.items()))
            self._spill(oldest)
            del self._resident[scenario]

    def _spill(self, adapter: LoraAdapter) -> None:
        path = self._spill_path(adapter.scenario)
        try:
            self._spill_dir.mkdir(parents=True, exist_ok=True)
            save_file(peft_tensors(adapter.layers), str(path))
        except (OSError, SafetensorError) as exc:
            raise AdapterUnavailable(
                f"no room for another LoRA adapter: {self._capacity} stay in memory, and the least recently used "
                f"one (of {adapter.scenario}) could not be written to {path} ({_reason(exc)}); free space there"
            ) from exc
        self._spilled[adapter.scenario] = (adapter.version, adapter.scale)

    def _read_back(self, scenario: str) -> LoraAdapter:
        """The spilled adapter of `scenario`, read from its file."""
        version, scale = self._spilled[scenario]
        path = self._spill_path(scenario)
        try:
            layers = lora_layers(load_file(str(path)))
            self.check(layers)
        except (OSError, SafetensorError, ValueError) as exc:
            raise AdapterUnavailable(
                f"the LoRA adapter of {scenario} (version {version}) could not be read back from {path} "
                f"({_reason(exc)}); its requests fail until a new adapter of {scenario} is swapped in"
            ) from exc
        return LoraAdapter(scenario, version, scale, layers)

    def _spill_path(self, scenario: str) -> Path:
        return self._spill_dir / f"{scenario}.safetensors"


def _reason(exc: Exception) -> str:
    """An OS error's own words (`No space left on device`), else the exception's message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
