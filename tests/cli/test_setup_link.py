"""The set-up puts `reef` on the PATH (a link in ~/.local/bin to the checkout's .venv/bin/reef), so the README's bare
`reef` commands run as printed; it says when ~/.local/bin is not on the PATH and when it re-points a link."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
LINK_SCRIPT = CHECKOUT / "scripts" / "link-reef"


def link(home: Path, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PATH": path}
    return subprocess.run(["bash", str(LINK_SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_setup_links_reef_into_the_users_bin_and_reef_runs_by_its_bare_name(tmp_path: Path) -> None:
    assert "bash scripts/link-reef" in (CHECKOUT / "scripts" / "setup").read_text()
    bin_dir = tmp_path / ".local" / "bin"
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    done = link(tmp_path, path)
    assert done.returncode == 0, done.stderr
    assert (bin_dir / "reef").resolve() == (CHECKOUT / ".venv" / "bin" / "reef").resolve()
    assert "warning" not in done.stderr

    env = {**os.environ, "HOME": str(tmp_path), "PATH": path, "PYTHONPATH": str(CHECKOUT)}
    ran = subprocess.run(["reef", "--help"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0 and "serve" in ran.stdout, ran.stderr


def test_the_set_up_says_when_the_users_bin_is_off_the_path_or_a_link_moves(tmp_path: Path) -> None:
    bin_dir = tmp_path / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "reef").symlink_to(tmp_path / "another-checkout" / ".venv" / "bin" / "reef")
    done = link(tmp_path, "/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert f"{bin_dir / 'reef'} pointed to {tmp_path / 'another-checkout'}" in done.stderr
    assert f"warning: {bin_dir} is not on your PATH" in done.stderr and "source .venv/bin/activate" in done.stderr
