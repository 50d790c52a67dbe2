"""Weight versions name the weights: the same weights loaded again (a restart) get the same version, other weights
another; a version number is never given twice to one fingerprint, even across restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import torch

from reef_daemon.runtimes.embedded import EmbeddedRuntime
from reef_daemon.runtimes.embedded.versions import WeightVersion, fingerprint
from reef_daemon.settings import load_settings
from tests.support.embedded_running import RunningReef


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))


def test_the_fingerprint_follows_the_weights() -> None:
    assert fingerprint(tiny_model(1)) == fingerprint(tiny_model(1))
    assert fingerprint(tiny_model(1)) != fingerprint(tiny_model(2))
    changed = tiny_model(1)
    with torch.no_grad():
        changed[1].weight[0] += 1e-6
    assert fingerprint(changed) != fingerprint(tiny_model(1))


def test_a_restart_keeps_the_version_and_never_reuses_a_number(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    weights = fingerprint(tiny_model(1))
    first = WeightVersion(weights, ledger)
    assert str(first) == f"{weights}:0"
    assert [first.bump(), first.bump()] == [f"{weights}:1", f"{weights}:2"]
    restarted = WeightVersion(fingerprint(tiny_model(1)), ledger)
    assert str(restarted) == f"{weights}:0"  # the same weights as loaded: the same version
    assert restarted.bump() == f"{weights}:3"  # 1 and 2 named weights of the earlier run


def test_the_embedded_model_loaded_again_has_the_same_version(
    reef: RunningReef, model_cache: Path, tmp_path: Path
) -> None:
    incarnation, _, _ = reef.runtime.weight_version.rpartition(":")
    (tmp_path / "models").symlink_to(model_cache, target_is_directory=True)
    settings = load_settings(overrides={"reef.state-dir": str(tmp_path), "reef.port": "0"}, environ={})
    again = EmbeddedRuntime(settings)
    asyncio.run(again.start())
    try:
        assert again.weight_version == f"{incarnation}:0"
    finally:
        asyncio.run(again.close())
