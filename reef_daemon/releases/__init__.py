"""The release store: a versioned, append-only release history in git, large files kept by git-lfs.

Harness releases (`reef_daemon.harness.releases`) and weight checkpoints (`recipes.sao.checkpoints`) are both
lines of such a store.
"""

from reef_daemon.releases._errors import ReleaseStoreError
from reef_daemon.releases._store import Release, ReleaseStore

__all__ = ["Release", "ReleaseStore", "ReleaseStoreError"]
