"""What a trainer trains (`training.adapter`): the top layers of its own fp32 copy of the model (`full`), or a LoRA
adapter of its scenario on a frozen fp32 base that every scenario's trainer shares (`lora`, through peft).

Both hand out the weights the server takes: `full` the changed parameters under the served model's names (swapped
into the base), `lora` the adapter's lora_A / lora_B tensors under the names PEFT saves (served beside the base).
Loading the fp32 model takes a few seconds and ~540 MB for the embedded model; `lora` pays it once per daemon.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from recipes.sao.settings import TrainingSection

TRAINABLE_LAYERS = 4  # the top decoder blocks `full` trains


@contextlib.contextmanager
def quiet_peft() -> Iterator[None]:
    """peft still reads a transformers property that transformers 5 deprecated; the warning says nothing to users."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        yield


def _load(weights_dir: Path, device: torch.device) -> Any:
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(weights_dir, dtype=torch.float32, local_files_only=True)
    model = model.to(device)
    model.train(False)  # no dropout; gradients still flow
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


class Policy(ABC):
    """One scenario's trainable part of a model, and the model it runs in."""

    # Held around every forward and backward pass: a shared base serves one adapter at a time.
    lock: threading.Lock

    @property
    @abstractmethod
    def model(self) -> Any:
        """The transformers (or peft) model, with this policy's weights active once `activate` was called."""

    @property
    @abstractmethod
    def trainable(self) -> dict[str, torch.nn.Parameter]:
        """The parameters a policy step moves."""

    @abstractmethod
    def activate(self) -> None:
        """Make the model compute with this policy's weights (under `lock`)."""

    @abstractmethod
    def weights(self) -> dict[str, torch.Tensor]:
        """Detached CPU copies of the trained weights, named as the server takes them."""

    def load(self, state: dict[str, torch.Tensor]) -> None:
        """Copy a checkpoint's weights (named as `weights` names them) into the trainable parameters."""
        with torch.no_grad():
            for name, tensor in self._by_served_name().items():
                if name in state:
                    tensor.copy_(state[name])

    def _by_served_name(self) -> dict[str, torch.nn.Parameter]:
        return self.trainable

    def train_dropout(self, on: bool) -> None:  # noqa: B027 - only an adapter has dropout
        """Turn the adapter's dropout on for the forward passes of a training step, off for reading."""


class FullPolicy(Policy):
    """The top `TRAINABLE_LAYERS` decoder blocks and the final norm of a model copy of its own."""

    def __init__(self, weights_dir: Path, device: torch.device) -> None:
        self._model = _load(weights_dir, device)
        self.lock = threading.Lock()
        layers = self._model.model.layers
        prefixes = {f"model.layers.{index}." for index in range(max(0, len(layers) - TRAINABLE_LAYERS), len(layers))}
        self._trainable = {}
        for name, parameter in self._model.named_parameters():
            if any(name.startswith(prefix) for prefix in prefixes) or name.startswith("model.norm."):
                parameter.requires_grad_(True)
                self._trainable[name] = parameter

    @property
    def model(self) -> Any:
        return self._model

    @property
    def trainable(self) -> dict[str, torch.nn.Parameter]:
        return self._trainable

    def activate(self) -> None:
        return None

    def weights(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().to("cpu", copy=True) for name, p in self._trainable.items()}


class LoraBase:
    """The frozen fp32 base shared by every scenario's adapter: a peft model holding one adapter per scenario."""

    def __init__(self, weights_dir: Path, training: TrainingSection, device: torch.device) -> None:
        self._weights_dir = weights_dir
        self._training = training
        self._device = device
        self._model: Any = None
        self.lock = threading.Lock()
        self._names: dict[str, str] = {}  # scenario -> peft adapter name (scenario names may hold '.' or '-')

    @property
    def weights_dir(self) -> Path:
        return self._weights_dir

    def load(self) -> None:
        """Load the base now (the first adapter would otherwise), so that a daemon is ready when it starts."""
        from peft import get_peft_model

        with self.lock, quiet_peft():
            if self._model is None:
                self._model = get_peft_model(
                    _load(self._weights_dir, self._device), self.config(), adapter_name="unused"
                )

    def config(self) -> Any:
        """The peft LoraConfig of every scenario's adapter (the training.lora-* settings)."""
        return lora_config(lora_manifest(self._training), str(self._weights_dir))

    @property
    def scale(self) -> float:
        return self._training.lora_alpha / self._training.lora_rank

    def policy(self, scenario: str) -> LoraPolicy:
        """A fresh adapter for `scenario` (B = 0: it serves exactly the base until it trains)."""
        from peft import get_peft_model

        with self.lock, quiet_peft():
            name = f"scenario{len(self._names)}"
            if self._model is None:
                self._model = get_peft_model(_load(self._weights_dir, self._device), self.config(), adapter_name=name)
            else:
                self._model.add_adapter(name, self.config())
            self._model.set_adapter(name)
            if "unused" in self._model.peft_config:  # the adapter `load` made the base with
                self._model.delete_adapter("unused")
            self._names[scenario] = name
            marker = f".{name}."
            trainable = {n: p for n, p in self._model.named_parameters() if marker in n}
            for parameter in trainable.values():
                parameter.requires_grad_(True)
        return LoraPolicy(self, name, trainable)

    @property
    def model(self) -> Any:
        return self._model


def lora_manifest(training: TrainingSection) -> dict[str, Any]:
    """How a checkpoint's manifest describes the adapters these settings train (its `adapter`)."""
    return {
        "kind": "lora",
        "r": training.lora_rank,
        "alpha": training.lora_alpha,
        "dropout": training.lora_dropout,
        "target_modules": list(training.lora_target_modules),
    }


def lora_config(adapter: Mapping[str, Any], base: str) -> Any:
    """The peft LoraConfig of an adapter as a manifest describes it (`lora_manifest`), on the model at `base`."""
    from peft import LoraConfig

    return LoraConfig(
        r=int(adapter["r"]),
        lora_alpha=int(adapter["alpha"]),
        lora_dropout=float(adapter.get("dropout", 0.0)),
        target_modules=list(adapter["target_modules"]),
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base,
    )


def peft_files(state: dict[str, torch.Tensor], adapter: Mapping[str, Any], base: str) -> dict[str, bytes]:
    """An adapter checkpoint (PEFT-named tensors; any others, like the value head, are left out) as the files
    `PeftModel.save_pretrained` writes: `adapter_config.json` and `adapter_model.safetensors`."""
    import tempfile

    from safetensors.torch import save

    with tempfile.TemporaryDirectory() as folder:
        lora_config(adapter, base).save_pretrained(folder)
        config_bytes = (Path(folder) / "adapter_config.json").read_bytes()
    tensors = {name: t.contiguous() for name, t in state.items() if ".lora_A." in name or ".lora_B." in name}
    return {"adapter_config.json": config_bytes, "adapter_model.safetensors": save(tensors, {"format": "pt"})}


class LoraPolicy(Policy):
    """One scenario's adapter in the shared `LoraBase`."""

    def __init__(self, base: LoraBase, name: str, trainable: dict[str, torch.nn.Parameter]) -> None:
        self._base = base
        self._name = name
        self._trainable = trainable
        self.lock = base.lock

    @property
    def model(self) -> Any:
        return self._base.model

    @property
    def trainable(self) -> dict[str, torch.nn.Parameter]:
        return self._trainable

    @property
    def scale(self) -> float:
        return self._base.scale

    def activate(self) -> None:
        self._base.model.set_adapter(self._name)
        for parameter in self._trainable.values():  # set_adapter may mark the active adapter's weights trainable
            parameter.requires_grad_(True)

    def weights(self) -> dict[str, torch.Tensor]:
        """The adapter's tensors under PEFT's saved names (`base_model.model.<module>.lora_A.weight`)."""
        return {served: p.detach().to("cpu", copy=True) for served, p in self._by_served_name().items()}

    def _by_served_name(self) -> dict[str, torch.nn.Parameter]:
        marker = f".{self._name}."
        return {name.replace(marker, "."): parameter for name, parameter in self._trainable.items()}

    def train_dropout(self, on: bool) -> None:
        for name, module in self._base.model.named_modules():
            if name.endswith(f"lora_dropout.{self._name}"):
                module.train(on)
