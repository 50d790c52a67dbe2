"""The install script `GET /reef/harness/install` serves: which files an install writes, and the sh that writes
them. Each adapter's binding and in-session entries live with the adapter (`adapters/`)."""

from __future__ import annotations

from reef_daemon.harness.install.files import CanaryTree, InstallFiles, framed_checksum, install_files
from reef_daemon.harness.install.script import failure_script, install_script

__all__ = ["CanaryTree", "InstallFiles", "failure_script", "framed_checksum", "install_files", "install_script"]
