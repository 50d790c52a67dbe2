"""The release store: releases are appended and read back per line, promote/rollback add commits, large files go
to git-lfs (the repository keeps a pointer), and a reopened store sees everything stored before."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reef_daemon.releases import ReleaseStore, ReleaseStoreError

WEIGHTS = os.urandom(300_000)


OpenStore = Callable[..., ReleaseStore]


@pytest.fixture
def open_store() -> Iterator[OpenStore]:
    """Opens stores and closes each after the test, so no git helper process outlives it."""
    opened: list[ReleaseStore] = []

    def opening(path: Path, **options: Any) -> ReleaseStore:
        opened.append(ReleaseStore(path, **options))
        return opened[-1]

    yield opening
    for store in opened:
        store.close()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_appended_releases_are_read_back_and_listed_oldest_first(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store(tmp_path / "releases.git")
    first = store.append("demo", {"AGENTS.md": b"be brief\n"}, {"operation": "creation"}, None, "creation")
    second = store.append("demo", {"AGENTS.md": b"be kind\n", "a/b.md": b"x"}, {"operation": "step"}, first, "step")

    release = store.read("demo", second)
    assert release is not None
    assert release.files == {"AGENTS.md": b"be kind\n", "a/b.md": b"x"}
    assert release.manifest == {"operation": "step"}
    assert store.history("demo") == [first, second]
    assert store.base("demo") == first
    assert git(store.path, "rev-parse", f"{second}^") == first  # built on its parent


def test_a_release_is_found_only_in_its_own_line(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store(tmp_path / "releases.git")
    mine = store.append("a.b", {"f": b"1"}, {}, None, "first")
    store.append("other", {"f": b"2"}, {}, None, "first")

    assert store.read("other", mine) is None and store.manifest("other", mine) is None
    assert store.read("a.b", "not-a-sha") is None
    assert store.history("other") != store.history("a.b") == [mine]
    assert store.history("never-used") == [] and store.base("never-used") is None


def test_republish_adds_a_commit_with_the_old_files_and_rewrites_nothing(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store(tmp_path / "releases.git")
    v0 = store.append("demo", {"f": b"old"}, {"v": 0}, None, "creation")
    v1 = store.append("demo", {"f": b"new"}, {"v": 1}, v0, "step")

    rolled = store.republish("demo", v0, {"v": 0, "operation": "rollback"}, v1, "rollback of v0")

    release = store.read("demo", rolled)
    assert release is not None and release.files == {"f": b"old"}
    assert release.manifest == {"v": 0, "operation": "rollback"}
    assert store.history("demo") == [v0, v1, rolled]
    assert git(store.path, "rev-parse", f"{rolled}^") == v1
    assert git(store.path, "log", "--format=%s", "-1", rolled) == "rollback of v0"
    with pytest.raises(ReleaseStoreError):
        store.republish("demo", "0" * 40, {}, v1, "nothing to republish")


def test_large_files_are_kept_by_git_lfs_and_read_back_whole(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store(tmp_path / "weights", manifest="manifest.json", large_files=("*.safetensors",))
    release_id = store.append("toy", {"weights.safetensors": WEIGHTS, "note.txt": b"hi"}, {"step": 1}, None, "ckpt")

    pointer = git(store.path, "cat-file", "-p", f"{release_id}:weights.safetensors")
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1") and len(pointer) < 200
    assert "filter=lfs" in git(store.path, "cat-file", "-p", f"{release_id}:.gitattributes")
    assert git(store.path, "cat-file", "-p", f"{release_id}:note.txt") == "hi"
    loose_kib = int(git(store.path, "count-objects", "-v").split("size: ")[1].split()[0])
    assert loose_kib < 64 and git(store.path, "count-objects", "-v").count("size-pack: 0") == 1  # git stays small
    assert sum(f.stat().st_size for f in (store.path / "lfs" / "objects").rglob("*") if f.is_file()) == len(WEIGHTS)

    release = store.read("toy", release_id)
    assert release is not None and release.files == {"weights.safetensors": WEIGHTS, "note.txt": b"hi"}
    assert release.manifest == {"step": 1}


def test_a_reopened_store_reads_what_was_stored_before(tmp_path: Path, open_store: OpenStore) -> None:
    path = tmp_path / "weights"
    store = open_store(path, manifest="manifest.json", large_files=("*.safetensors",))
    first = store.append("toy", {"weights.safetensors": WEIGHTS}, {"step": 0}, None, "base")
    second = store.republish("toy", first, {"step": 0}, first, "roll back")
    store.close()

    again = open_store(path, manifest="manifest.json", large_files=("*.safetensors",))
    assert again.history("toy") == [first, second] and again.base("toy") == first
    release = again.read("toy", second)
    assert release is not None and release.files == {"weights.safetensors": WEIGHTS}
    third = again.append("toy", {"weights.safetensors": b"next"}, {"step": 1}, second, "step 1")
    assert again.history("toy") == [first, second, third]


def test_a_history_on_a_branch_is_adopted_with_its_commit_ids(tmp_path: Path, open_store: OpenStore) -> None:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    ids = []
    for step in range(2):
        (work / "manifest.json").write_text(f'{{"step": {step}}}')
        git(work, "add", "manifest.json")
        git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"step {step}")
        ids.append(git(work, "rev-parse", "HEAD"))

    store = open_store(work, manifest="manifest.json")
    assert store.adopt("toy", "refs/heads/main") == ids
    assert store.history("toy") == ids and store.base("toy") == ids[0]
    assert store.manifest("toy", ids[1]) == {"step": 1}
    assert store.adopt("toy", "refs/heads/absent") == []


def test_closing_while_a_read_is_in_flight_lets_the_read_finish(tmp_path: Path) -> None:
    # A daemon that stops closes its store while a request's read may still run in a worker thread.
    store = ReleaseStore(tmp_path / "releases.git")
    files = {f"file{index}": os.urandom(100_000) for index in range(20)}
    release_id = store.append("demo", files, {}, None, "first")
    failures: list[BaseException] = []
    reading = threading.Event()
    stop = threading.Event()

    def read_until_stopped() -> None:
        while not stop.is_set():
            try:
                release = store.read("demo", release_id)
                assert release is not None and release.files == files
            except BaseException as error:  # collected for the assertion below
                failures.append(error)
            reading.set()

    gc.collect()  # what earlier tests left for the collector is not this test's
    unraisable: list[BaseException | None] = []
    hook, sys.unraisablehook = sys.unraisablehook, lambda report: unraisable.append(report.exc_value)
    reader = threading.Thread(target=read_until_stopped)
    try:
        reader.start()
        reading.wait(10)
        for _ in range(30):
            time.sleep(0.005)
            store.close()
        stop.set()
        reader.join(10)
        store.close()  # the reads after the last close started git's helpers again
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert failures == [] and unraisable == []
