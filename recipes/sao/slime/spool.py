"""Handing eligible rollouts from reef to Slime through a folder on this machine.

Reef writes each rollout's `Sample` fields as `pending/<index>.json` (written whole, then renamed into place);
Slime's rollout function takes the oldest `count` of them, moving them to `taken/<rollout_id>/`, so a restart
of either side neither loses nor repeats one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

POLL_S = 1.0


def hand_over(spool: Path, samples: Iterable[dict[str, Any]]) -> int:
    """Write samples (each with a unique `index`) for Slime to take; returns how many."""
    pending = spool / "pending"
    pending.mkdir(parents=True, exist_ok=True)
    count = 0
    for sample in samples:
        final = pending / f"{int(sample['index']):012d}.json"
        partial = final.with_suffix(".partial")
        partial.write_text(json.dumps(sample), encoding="utf-8")
        os.replace(partial, final)
        count += 1
    return count


def next_index(spool: Path) -> int:
    """One more than the highest index handed over so far (taken or not)."""
    names = [path.stem for path in spool.glob("*/**/*.json")] if spool.is_dir() else []
    return max((int(name) for name in names if name.isdigit()), default=-1) + 1


def take(spool: Path, count: int, rollout_id: int, wait: Callable[[float], None] = time.sleep) -> list[dict[str, Any]]:
    """The oldest `count` samples, once that many are waiting (Slime's side; it blocks its rollout actor)."""
    pending = spool / "pending"
    while True:
        ready = sorted(pending.glob("*.json")) if pending.is_dir() else []
        if len(ready) >= count:
            break
        wait(POLL_S)
    taken = spool / "taken" / str(rollout_id)
    taken.mkdir(parents=True, exist_ok=True)
    samples = []
    for path in ready[:count]:
        samples.append(json.loads(path.read_text(encoding="utf-8")))
        os.replace(path, taken / path.name)
    return samples
