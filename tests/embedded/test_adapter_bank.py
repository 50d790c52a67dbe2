"""The adapter bank on a small linear model: per-row deltas, refused misfits, and the resident cap with
least-recently-used adapters spilled to disk and read back on demand with their version; a spill that cannot be
written, or read back, fails that adapter alone with the reason."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from reef_daemon.runtimes.embedded import adapters as adapters_module
from reef_daemon.runtimes.embedded.adapters import (
    PEFT_PREFIX,
    AdapterBank,
    AdapterUnavailable,
    LoraAdapter,
    lora_layers,
)


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


def test_a_full_spill_folder_fails_the_new_adapter_and_keeps_the_others(
    model: Tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bank = AdapterBank(model, 2, tmp_path / "spilled")
    one, two = adapter("one", 1), adapter("two", 2)
    bank.install(one)
    bank.install(two)

    def disk_full(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(adapters_module, "save_file", disk_full)
    with pytest.raises(AdapterUnavailable, match=r"could not be written to .*spilled/one\.safetensors \(No space left"):
        bank.install(adapter("three", 3))
    assert bank.resident == ["one", "two"] and bank.scenarios == ["one", "two"]
    assert bank.get("one") is one and bank.get("two") is two  # both still served, from memory
    monkeypatch.undo()
    bank.install(adapter("three", 3))  # once there is room on disk, it swaps in
    assert bank.scenarios == ["one", "three", "two"]


def test_an_unwritable_spill_folder_says_so(model: Tiny, tmp_path: Path) -> None:
    blocked = tmp_path / "spilled"
    blocked.write_text("a file where the folder should be")
    bank = AdapterBank(model, 1, blocked)
    bank.install(adapter("one", 1))
    with pytest.raises(AdapterUnavailable, match=r"of one\) could not be written to"):
        bank.install(adapter("two", 2))
    assert bank.resident == ["one"]


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_spilled_adapter_that_cannot_be_read_back_fails_its_scenario_alone(
    model: Tiny, tmp_path: Path, damage: str
) -> None:
    bank = AdapterBank(model, 1, tmp_path)
    bank.install(adapter("one", 1))
    bank.install(adapter("two", 2))  # "one" spills
    spilled = tmp_path / "one.safetensors"
    if damage == "corrupt":
        spilled.write_bytes(b"not a safetensors file")
    else:
        spilled.unlink()
    with pytest.raises(AdapterUnavailable, match=r"adapter of one \(version v:1\) could not be read back from .*one"):
        bank.get("one")
    two = bank.get("two")
    assert two is not None and two.version == "v:2"  # the other scenario is still served
    bank.install(adapter("one", 11, "v:11"))  # a new adapter of the scenario serves it again
    again = bank.get("one")
    assert again is not None and again.version == "v:11"
