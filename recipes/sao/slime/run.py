"""A Slime run as reef drives it: start the Ray head and submit `train.py` as a Ray job, hand it eligible rollouts,
stop both when reef stops. Output goes to `<state>/logs/slime.log`.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from pathlib import Path

import yaml

from recipes.sao.rollout import Rollout
from recipes.sao.slime.contract import SlimePlan, sample_fields
from recipes.sao.slime.spool import hand_over, next_index
from reef_daemon.recipe_api import SettingsError

log = logging.getLogger("reef.sao")


class SlimeRun:
    def __init__(self, plan: SlimePlan, log_dir: Path) -> None:
        self.plan = plan
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = log_dir / "slime.log"
        self._index = next_index(plan.spool)

    def launch(self) -> None:
        """Start each planned process in order, each run to its end (`ray start` and `ray job submit --no-wait`
        return once the head runs and the job is queued); SettingsError with the log's place when one fails."""
        self.plan.work.mkdir(parents=True, exist_ok=True)
        (self.plan.work / "megatron.yaml").write_text(yaml.safe_dump(self.plan.megatron_config), encoding="utf-8")
        for process in self.plan.processes:
            log.info("starting %s: %s", process.name, " ".join(process.argv))
            with open(self._log_file, "ab") as output:
                done = subprocess.run(process.argv, stdout=output, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                raise SettingsError(f"{process.name} exited with status {done.returncode}; see {self._log_file}")

    def hand_over(self, rollouts: Sequence[Rollout]) -> int:
        """Queue scored rollouts for Slime's next rollout call; returns how many."""
        samples = [sample_fields(rollout, self._index + offset) for offset, rollout in enumerate(rollouts)]
        self._index += len(samples)
        return hand_over(self.plan.spool, samples)

    def stop(self) -> None:
        """Stop the job and the Ray head reef started."""
        with open(self._log_file, "ab") as output:
            for argv in self.plan.stop:
                subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT, check=False)
