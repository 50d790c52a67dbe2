"""The decoding copies' memory: tensors carved out of mappings meant for 2 MiB pages, each tensor's room its own while
anything reads it, and reused once nothing does."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
import torch

from reef_daemon.runtimes.embedded.huge_pages import HUGE_PAGE, HugePageArena


def span(tensor: torch.Tensor) -> range:
    return range(tensor.data_ptr(), tensor.data_ptr() + tensor.numel() * tensor.element_size())


def overlap(a: range, b: range) -> bool:
    return a.start < b.stop and b.start < a.stop


def test_tensors_get_rooms_of_their_own_and_keep_their_values() -> None:
    arena = HugePageArena(chunk_bytes=HUGE_PAGE)
    made = [arena.empty((n, 33), torch.float16).fill_(n) for n in range(1, 40)]  # several mappings' worth
    for i, a in enumerate(made):
        assert a.data_ptr() % 64 == 0
        assert all(not overlap(span(a), span(b)) for b in made[i + 1 :])
    assert all(torch.equal(t, torch.full_like(t, n)) for n, t in enumerate(made, 1))
    assert torch.equal(arena.zeros((5, 7), torch.uint8), torch.zeros(5, 7, dtype=torch.uint8))


def test_a_room_is_reused_once_nothing_reads_it_and_not_before() -> None:
    arena = HugePageArena()
    first = arena.empty((1000,), torch.float32).fill_(1.0)
    where = first.data_ptr()
    view = first[10:]  # still reads the room after `first` is gone
    del first
    gc.collect()
    second = arena.empty((1000,), torch.float32).fill_(2.0)
    assert not overlap(span(second), span(view)) and bool((view == 1.0).all())
    del view
    gc.collect()
    third = arena.empty((1000,), torch.float32)
    assert third.data_ptr() == where  # the same size again: the room given back
    assert bool((second == 2.0).all())


def test_memory_faulted_in_ahead_keeps_what_the_tensors_write_meanwhile() -> None:
    arena = HugePageArena(expected_bytes=64 << 20)  # faulted in on a thread while the tensors below are written
    made = [arena.empty((1 << 20,), torch.float32).fill_(n) for n in range(16)]
    for faulting in [t for t in threading.enumerate() if t.name == "reef-huge-pages"]:
        faulting.join()
    assert all(bool((t == n).all()) for n, t in enumerate(made))


def transparent_huge_pages() -> str:
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    text = path.read_text() if path.exists() else ""
    return text.split("[")[1].split("]")[0] if "[" in text else "absent"


def anonymous_huge_kib() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


@pytest.mark.skipif(transparent_huge_pages() not in ("always", "madvise"), reason="this kernel grants no huge pages")
def test_where_the_kernel_grants_huge_pages_the_copies_are_on_them() -> None:
    before = anonymous_huge_kib()
    arena = HugePageArena()
    copies = [arena.zeros((1 << 20,), torch.uint8) for _ in range(24)]  # 24 MiB of decode copies
    assert anonymous_huge_kib() - before >= 16 * 1024  # most of them, whole 2 MiB pages
    assert sum(c.numel() for c in copies) == 24 << 20
