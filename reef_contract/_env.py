"""The environment variables reef reads: where clients find the daemon, its token, and settings that may come
from the environment (`reef serve --help` names each beside its key)."""

from __future__ import annotations

from typing import Final

# The daemon's address for the CLI, the TUI and the wrappers (like --url).
URL_ENV: Final = "REEF_URL"
# The token the clients send (like --token).
TOKEN_ENV: Final = "REEF_TOKEN"  # noqa: S105 (a variable name, not a secret)
# The upstream model: its base URL, its model name, its API key.
UPSTREAM_URL_ENV: Final = "REEF_UPSTREAM_URL"
UPSTREAM_MODEL_ENV: Final = "REEF_UPSTREAM_MODEL"
UPSTREAM_API_KEY_ENV: Final = "REEF_UPSTREAM_API_KEY"
# How the change-request proposer's trials are jailed: bwrap (bubblewrap), or none on a trusted machine.
PROPOSER_SANDBOX_ENV: Final = "REEF_PROPOSER_SANDBOX"
# The interpreter an install script runs reef's wrapper with.
PYTHON_ENV: Final = "REEF_PYTHON"
# The store's database: a postgresql:// URL several daemons share (none: the SQLite file in the state directory).
STORE_URL_ENV: Final = "REEF_STORE_URL"
# Settings an environment variable may give (`reef serve --help` lists them with their keys).
INFERENCE_TIMEOUT_ENV: Final = "REEF_INFERENCE_TIMEOUT_S"
SAO_BATCH_SIZE_ENV: Final = "REEF_SAO_BATCH_SIZE"
MAX_STALENESS_ENV: Final = "REEF_MAX_STALENESS"
HARNESS_ADAPTER_ENV: Final = "REEF_HARNESS_ADAPTER"
# Where reef hands eligible rollouts to a Slime job (training.trainer = slime), set in the job's environment.
SLIME_SPOOL_ENV: Final = "REEF_SLIME_SPOOL"
# SAO's length-adaptive GAE alpha, handed to the Slime job's advantage hook (Slime drops flags it does not know).
SAO_LAMBDA_ALPHA_ENV: Final = "REEF_SAO_LAMBDA_ALPHA"
# The key reef sends to a judge endpoint (reports.judge-url).
JUDGE_API_KEY_ENV: Final = "REEF_JUDGE_API_KEY"
# Where the wrappers keep the notes of what each session changed in its git repository (`reef outcomes scan`).
OUTCOMES_DIR_ENV: Final = "REEF_OUTCOMES_DIR"
