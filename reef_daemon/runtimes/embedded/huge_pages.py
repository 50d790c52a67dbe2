"""Memory on 2 MiB pages for the decoding copies of the weights.

A decoding step streams every decode weight once. On ordinary 4 KiB pages the CPU's prefetching stops at every page
and each page costs an address translation, so two cores read about 0.6x as fast as from 2 MiB pages (measured here
summing 151 MiB: 33 against 56 GB/s). The copies are small tensors (most of a layer's weights are under 1 MiB, too
small to get a huge page of their own), so they are carved out of large private anonymous mappings that the kernel
is asked to back with transparent huge pages (`madvise(MADV_HUGEPAGE)`; Linux with transparent huge pages set to
`always` or `madvise`). Elsewhere, or where the kernel declines, the same mappings are ordinary memory.

A tensor's room is given back when the last tensor viewing it is gone, and reused for the next tensor of the same
size (a swap makes new copies of the same shapes). Faulting a fresh 2 MiB page in can be slow (~8 ms on a VM whose
host backs the page on first touch), so an arena told how much it will hold faults that much in on a thread of its
own (`MADV_POPULATE_WRITE`) while the model loads.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
import sys
import threading
import weakref

import torch

HUGE_PAGE = 2 << 20
CHUNK = 32 << 20  # bytes mapped at a time (the whole of SmolLM2-135M's 8-bit copies take 151 MB)
ALIGN = 64  # each tensor starts on a cache line
POPULATE_STEP = 2 << 20  # bytes faulted in per call, so the work can stop between calls
MADV_POPULATE_WRITE = 23  # Linux 5.14 and later: fault pages in, writable, without changing them


class HugePageArena:
    """`empty(shape, dtype)`: a tensor on memory meant for 2 MiB pages."""

    def __init__(self, chunk_bytes: int = CHUNK, expected_bytes: int = 0) -> None:
        """`expected_bytes`: how much the arena will hold, at least; faulted in ahead, on a thread of its own."""
        self._chunk_bytes = chunk_bytes
        # Reentrant: a room is given back by a finalizer, which the cyclic collector may run while this thread holds it.
        self._lock = threading.RLock()
        self._chunks: list[mmap.mmap] = []
        self._top = 0  # the first unused byte of the last chunk
        self._free: dict[int, list[tuple[int, int]]] = {}  # room size -> (chunk, offset) given back
        if expected_bytes > 0:
            first = self._new_chunk(expected_bytes)
            threading.Thread(
                target=_fault_in, args=(first, self._top, expected_bytes), name="reef-huge-pages", daemon=True
            ).start()

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        count = 1
        for size in shape:
            count *= size
        nbytes = max(count * dtype.itemsize, 1)
        room = -(-nbytes // ALIGN) * ALIGN
        chunk, offset = self._take(room)
        view = memoryview(self._chunks[chunk])[offset : offset + nbytes]
        weakref.finalize(view, self._give_back, room, chunk, offset)  # once no tensor reads it any more
        return torch.frombuffer(view, dtype=dtype, count=count).view(shape)

    def zeros(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return self.empty(shape, dtype).zero_()

    def _take(self, room: int) -> tuple[int, int]:
        with self._lock:
            given_back = self._free.get(room)
            if given_back:
                return given_back.pop()
            if not self._chunks or self._top + room > len(self._chunks[-1]):
                self._new_chunk(room)
            offset, self._top = self._top, self._top + room
            return len(self._chunks) - 1, offset

    def _new_chunk(self, room: int) -> mmap.mmap:
        """Map the chunk the next rooms are taken from, with `room` bytes at least from its first 2 MiB boundary."""
        chunk = _huge_mapping(max(self._chunk_bytes, room + HUGE_PAGE))
        self._chunks.append(chunk)
        self._top = _first_huge_page(chunk)
        return chunk

    def _give_back(self, room: int, chunk: int, offset: int) -> None:
        with self._lock:
            self._free.setdefault(room, []).append((chunk, offset))


def _huge_mapping(size: int) -> mmap.mmap:
    """A private anonymous mapping, its 2 MiB-aligned interior advised to be backed by huge pages."""
    mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    start = _first_huge_page(mapping)
    if advice is not None and start < size:
        with contextlib.suppress(OSError):  # transparent huge pages off: ordinary pages
            mapping.madvise(advice, start, size - start)
    return mapping


def _fault_in(mapping: mmap.mmap, start: int, length: int) -> None:
    """Fault `length` bytes of the mapping in from `start`, contents unchanged (the allocator may be writing there
    already); quietly nothing where the kernel cannot (not Linux, or before 5.14)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    address = _address(mapping) + start
    for offset in range(0, length, POPULATE_STEP):  # ctypes lets the loading thread run meanwhile
        if libc.madvise(ctypes.c_void_p(address + offset), min(POPULATE_STEP, length - offset), MADV_POPULATE_WRITE):
            return


def _address(mapping: mmap.mmap) -> int:
    first = ctypes.c_char.from_buffer(mapping)
    address = ctypes.addressof(first)
    del first  # the mapping's export ends with it
    return address


def _first_huge_page(mapping: mmap.mmap) -> int:
    """The offset of the first 2 MiB boundary in the mapping (0 where it starts on one)."""
    return -_address(mapping) % HUGE_PAGE
