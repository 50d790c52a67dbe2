"""Weight checkpoints: saved, listed and read back after a reopen, rolled back as a new commit, weights kept by
git-lfs, and a checkpoint repository written by earlier reef (commits on `main` in a work tree) taken over whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import torch
from safetensors.torch import save_file

from recipes.sao.checkpoints import MANIFEST_FILE, WEIGHTS_FILE, CheckpointRepo


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=reef", "-c", "user.email=reef@localhost", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def weights(value: float) -> dict[str, torch.Tensor]:
    return {"layer.weight": torch.full((64, 64), value), "head.bias": torch.full((8,), value)}


def same(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> bool:
    return state.keys() == expected.keys() and all(torch.equal(state[name], expected[name]) for name in state)


def test_checkpoints_survive_a_reopen_and_a_rollback_restores_old_weights(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints" / "toy"
    repo = CheckpointRepo(root)
    repo.open()
    assert repo.latest() is None and repo.history() == []
    base = repo.save(weights(0.0), {"step": 0, "steps_done": 0}, "base weights")
    step = repo.save(weights(1.0), {"step": 1, "steps_done": 1}, "checkpoint after 1 steps")

    again = CheckpointRepo(root)
    again.open()
    assert again.history() == [base, step]
    latest = again.latest()
    assert latest is not None and latest.release_id == step and latest.manifest["step"] == 1
    state, manifest = again.read()
    assert same(state, weights(1.0)) and manifest["steps_done"] == 1
    assert again.has(base) and not again.has("not-a-checkpoint")

    rolled = again.republish(base, f"roll back to {base}")
    assert again.history() == [base, step, rolled]
    state, manifest = again.read()
    assert same(state, weights(0.0)) and manifest == {"step": 0, "steps_done": 0}
    assert git(root, "rev-parse", f"{rolled}^") == step  # a new commit on the history, nothing rewritten
    pointer = git(root, "cat-file", "-p", f"{rolled}:{WEIGHTS_FILE}")
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1")


def test_a_checkpoint_repository_from_earlier_reef_is_taken_over(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints" / "toy"
    root.mkdir(parents=True)
    # The layout earlier reef wrote: a work tree on `main`, safetensors through the lfs filter, one commit each.
    git(root, "init", "-q", "-b", "main")
    git(root, "lfs", "install", "--local")
    (root / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    git(root, "add", ".gitattributes")
    git(root, "commit", "-q", "-m", "weight checkpoints of this scenario")
    ids = []
    for step in range(2):
        save_file(weights(float(step)), str(root / WEIGHTS_FILE))
        (root / MANIFEST_FILE).write_text(json.dumps({"step": step, "steps_done": step}))
        git(root, "add", WEIGHTS_FILE, MANIFEST_FILE)
        git(root, "commit", "-q", "-m", f"checkpoint {step}")
        ids.append(git(root, "rev-parse", "HEAD"))

    repo = CheckpointRepo(root)
    repo.open()
    assert repo.history() == ids
    latest = repo.latest()
    assert latest is not None and latest.release_id == ids[1]
    state, _ = repo.read()
    assert same(state, weights(1.0))

    rolled = repo.republish(ids[0], "roll back")
    state, manifest = repo.read()
    assert same(state, weights(0.0)) and manifest["step"] == 0
    reopened = CheckpointRepo(root)
    reopened.open()
    assert reopened.history() == [*ids, rolled]
