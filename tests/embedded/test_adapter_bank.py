"""The adapter bank on a small linear model: per-row deltas, refused misfits, and the resident cap with
least-recently-used adapters spilled to disk and read back on demand with their version."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from reef_daemon.runtimes.embedded.adapters import PEFT_PREFIX, AdapterBank, LoraAdapter, lora_layers


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(6, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.q_proj(x)
        return out


def adapter(scenario: str, seed: int, version: str = "") -> LoraAdapter:
    generator = torch.Generator().manual_seed(seed)
    state = {
        f"{PEFT_PREFIX}q_proj.lora_A.weight": torch.randn(2, 6, generator=generator),
        f"{PEFT_PREFIX}q_proj.lora_B.weight": torch.randn(4, 2, generator=generator),
    }
    return LoraAdapter(scenario, version or f"v:{seed}", 0.5, lora_layers(state))


@pytest.fixture
def model() -> Tiny:
    torch.manual_seed(0)
    return Tiny()


def test_each_row_gets_its_own_adapters_delta(model: Tiny, tmp_path: Path) -> None:
    bank = AdapterBank(model, 4, tmp_path)
    one, two = adapter("one", 1), adapter("two", 2)
    bank.install(one)
    bank.install(two)
    x = torch.randn(3, 1, 6)
    with torch.inference_mode():
        base = model(x)
        with bank.serving([one, None, two]):
            served = model(x)
        after = model(x)
    for row, chosen in ((0, one), (2, two)):
        a, b = chosen.layers["q_proj"]
        assert torch.allclose(served[row], base[row] + 0.5 * (x[row] @ a.T) @ b.T)
    assert torch.equal(served[1], base[1]) and torch.equal(after, base)  # outside `serving`, the base alone


def test_an_adapter_that_does_not_fit_is_refused(model: Tiny, tmp_path: Path) -> None:
    bank = AdapterBank(model, 2, tmp_path)
    wrong = {
        f"{PEFT_PREFIX}q_proj.lora_A.weight": torch.zeros(2, 5),
        f"{PEFT_PREFIX}q_proj.lora_B.weight": torch.zeros(4, 2),
    }
    with pytest.raises(ValueError, match="q_proj"):
        bank.install(LoraAdapter("one", "v", 1.0, lora_layers(wrong)))
    with pytest.raises(ValueError, match="without its pair"):
        lora_layers({f"{PEFT_PREFIX}q_proj.lora_A.weight": torch.zeros(2, 6)})
    with pytest.raises(ValueError, match="not a LoRA matrix"):
        lora_layers({"q_proj.weight": torch.zeros(4, 6)})
    assert bank.scenarios == []


def test_past_the_cap_the_least_recently_used_spills_and_comes_back(model: Tiny, tmp_path: Path) -> None:
    bank = AdapterBank(model, 2, tmp_path)
    first = adapter("one", 1)
    for made in (first, adapter("two", 2)):
        bank.install(made)
    assert bank.get("one") is first  # now the most recently used
    bank.install(adapter("three", 3))
    assert bank.resident == ["one", "three"] and bank.scenarios == ["one", "three", "two"]
    assert bank.version("two") == "v:2" and (tmp_path / "two.safetensors").is_file()
    assert bank.resident_bytes() == 2 * first.nbytes
    back = bank.get("two")
    assert back is not None and back.version == "v:2"
    assert torch.equal(back.layers["q_proj"][1], adapter("two", 2).layers["q_proj"][1])
    assert bank.resident == ["three", "two"]  # "one" was the least recently used this time
    assert bank.get("none") is None
