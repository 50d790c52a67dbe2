"""The decoding kernels (`decode_kernel.c`): built for this machine on first use, loaded with ctypes.

A decoding step multiplies a few rows (one per sequence) by every weight of the model. torch's fp16 product on a CPU
without fp16 arithmetic converts the weights again for every row, so four rows cost about three times one; the
product kernel converts each weight once per step for all rows, and sums every output in a fixed order, so a row
gets the same bits alone or in any batch, on any number of threads (torch's, shared out by output features).
The attention kernel writes each row's new key and value into the cache and attends over exactly that row's
positions, reading a key/value head shared by several query heads in place (torch's path copies it per query head,
per layer and per token, which for a long context costs more than the weights). The norms, the rotary embedding,
the MLP's activation and a whole decoder layer made of these parts are there too, for `decode_step.py`.

The library is compiled with the system's C compiler (`$CC`, else `cc`) for this CPU into the user's cache
(~/.cache/reef/kernels), once per source, flags and CPU. Without a compiler, or where the build or load fails,
`load_kernel` says why once and returns None, and decoding uses torch's fp16 product and attention.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, NamedTuple, overload

import torch

from reef_daemon.runtimes.embedded.huge_pages import HugePageArena
from reef_daemon.runtimes.model_cache import user_model_cache

log = logging.getLogger("reef.embedded")

SOURCES = tuple(Path(__file__).with_name(name) for name in ("decode_kernel.c", "decode_pack.c"))
HEADERS = tuple(Path(__file__).with_name(name) for name in ("decode_format.h", "decode_half.h"))  # read by both
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-shared", "-fPIC")
LIBRARIES = ("-lm",)  # after the source, where the linker looks for what it needs
# The packed weights' layout, as decode_format.h has it: output features per panel; inputs sharing a scale and a
# minimum per output in the 8-bit and 4-bit formats; and the bytes of such a block of a panel (its weight bytes, then
# PANEL fp16 scales and PANEL fp16 minimums).
PANEL = 32
BLOCK = 32
BLOCK_WEIGHT_BYTES = BLOCK // 2 * 2 * PANEL
BLOCK_BYTES = BLOCK_WEIGHT_BYTES + 2 * PANEL * 2
NIBBLE_BLOCK_BYTES = (BLOCK // 2 + 1) // 2 * 2 * PANEL + 2 * PANEL * 2
FORMATS = ("fp16", "int8", "int4")  # a packed weight's format, numbered as decode_format.h numbers them
BUILD_TIMEOUT_S = 120
_kernel_threads = threading.local()  # per thread: the kernels' thread count while torch's ops run on one


@contextlib.contextmanager
def torch_on_one_thread() -> Iterator[None]:
    """Within: torch's own operations on this thread run on one thread, while the kernels keep torch's thread count
    from outside. A torch operation spread over threads leaves OpenMP's workers spinning for a while after it, on
    the cores the kernels' threads need; a decoding step's few torch operations are too small to gain from them (a
    step of four rows on two cores took 1.7-1.9x the time with them spinning)."""
    torch_threads, outer = torch.get_num_threads(), getattr(_kernel_threads, "count", None)
    _kernel_threads.count = kernel_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(torch_threads)
        _kernel_threads.count = outer


def kernel_threads() -> int:
    """Threads the kernels run on: torch's number, or what it was outside `torch_on_one_thread`."""
    count: int | None = getattr(_kernel_threads, "count", None)
    return torch.get_num_threads() if count is None else count


class Int8Panels(NamedTuple):
    """A weight packed for `DecodeKernel.linear` in 8 bits: its panels (bytes, scales and minimums), and how many
    blocks of BLOCK weights do not come back exactly (0: the copy is the weight, bit for bit)."""

    panels: torch.Tensor
    inexact: int


class DecodeKernel:
    """The built library: `linear`, y = x Wᵀ for fp32 rows and a weight packed by `pack`; `attend`, a decoding
    step's attention over a cache of keys and values; `pick_greedy`, greedy decoding's picks; the rest of a decoding
    step through `library`."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.library = library  # the layer's other parts, which `decode_step.py` calls
        self._linear = library.reef_linear
        self._linear.argtypes = [
            ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
            ctypes.c_void_p, ctypes.c_int,
        ]  # fmt: skip
        self._linear.restype = ctypes.c_int
        self._pack_q8 = library.reef_pack_q8
        self._pack_q8.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int]
        self._pack_q8.restype = ctypes.c_int64
        self._pack_q4 = library.reef_pack_q4
        self._pack_q4.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        self._pack_q4.restype = ctypes.c_int
        self._attention = library.reef_decode_attention
        self._attention.argtypes = [
            *[ctypes.c_void_p] * 6, *[ctypes.c_int64] * 5, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
        ]  # fmt: skip
        self._attention.restype = ctypes.c_int
        self._pick = library.reef_pick_greedy
        self._pick.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_int]  # fmt: skip
        self._pick.restype = ctypes.c_int
        kind = library.reef_decode_kernel_kind
        kind.restype = ctypes.c_char_p
        self.kind: str = kind().decode()

    @staticmethod
    def pack(weight: torch.Tensor, arena: HugePageArena | None = None) -> torch.Tensor:
        """The fp16 panels of `weight` [out, in]: [ceil(out / PANEL), in, PANEL], zero past the last output; in
        `arena`'s memory where one is given."""
        half = weight.detach().to(torch.float16)
        missing = -half.shape[0] % PANEL
        if missing:
            half = torch.cat([half, half.new_zeros(missing, half.shape[1])])
        panels = half.view(-1, PANEL, half.shape[1]).transpose(1, 2)
        return panels.contiguous() if arena is None else arena.empty(tuple(panels.shape), torch.float16).copy_(panels)

    @overload
    def pack_int8(
        self, weight: torch.Tensor, exact_only: Literal[False] = False, arena: HugePageArena | None = None
    ) -> Int8Panels: ...
    @overload
    def pack_int8(
        self, weight: torch.Tensor, exact_only: bool, arena: HugePageArena | None = None
    ) -> Int8Panels | None: ...

    def pack_int8(
        self, weight: torch.Tensor, exact_only: bool = False, arena: HugePageArena | None = None
    ) -> Int8Panels | None:
        """8-bit panels of `weight` [out, in] (`decode_pack.c`): an output's weights in each block of BLOCK inputs
        are q * s + m for a byte q, with s and m in fp16 per block. Weights dequantised from a GGUF's Q4_1 or Q8_0
        blocks come back exactly; other blocks get their range over 255 (as llama.cpp's Q8_1). Panels
        `[ceil(out / PANEL), ceil(in / BLOCK), BLOCK_BYTES]` uint8: per block, for each pair of inputs 2i, 2i + 1
        every output's two bytes side by side, then PANEL fp16 scales and PANEL fp16 minimums; zero past the last
        output and input; in `arena`'s memory where one is given. With `exact_only`, None unless every block comes
        back exactly (found at the first block that does not)."""
        w = weight.detach().to(torch.float32).contiguous()
        outputs, inputs = w.shape
        shape = (-(-outputs // PANEL), -(-inputs // BLOCK), BLOCK_BYTES)
        panels = torch.zeros(shape, dtype=torch.uint8) if arena is None else arena.zeros(shape, torch.uint8)
        inexact = int(self._pack_q8(w.data_ptr(), outputs, inputs, panels.data_ptr(), exact_only))
        return None if inexact and exact_only else Int8Panels(panels, inexact)

    def pack_int4(self, panels: torch.Tensor, arena: HugePageArena | None = None) -> torch.Tensor | None:
        """The 4-bit panels of a weight's 8-bit `panels` (from `pack_int8`), where every byte is under 16 (a GGUF's
        Q4_1 weights): the same weights, scales and minimums, two weights a byte, `[panels, blocks,
        NIBBLE_BLOCK_BYTES]`, in `arena`'s memory where one is given; None where a byte does not fit in 4 bits."""
        if panels.dtype != torch.uint8 or panels.dim() != 3 or panels.shape[2] != BLOCK_BYTES:
            raise ValueError(f"4-bit packing: 8-bit panels wanted, not {panels.dtype} {tuple(panels.shape)}")
        panels = panels.contiguous()
        shape = (panels.shape[0], panels.shape[1], NIBBLE_BLOCK_BYTES)
        nibbles = torch.empty(shape, dtype=torch.uint8) if arena is None else arena.empty(shape, torch.uint8)
        if self._pack_q4(panels.data_ptr(), panels.shape[0], panels.shape[1], nibbles.data_ptr()):
            return None
        return nibbles

    @staticmethod
    def format_of(packed: torch.Tensor) -> str:
        """The format of panels from `pack`, `pack_int8` or `pack_int4`: one of FORMATS."""
        if packed.dtype == torch.float16 and packed.dim() == 3 and packed.shape[2] == PANEL:
            return "fp16"
        if packed.dtype == torch.uint8 and packed.dim() == 3 and packed.shape[2] in (BLOCK_BYTES, NIBBLE_BLOCK_BYTES):
            return "int8" if packed.shape[2] == BLOCK_BYTES else "int4"
        raise ValueError(f"decoding product: no panels of a known format: {packed.dtype} {tuple(packed.shape)}")

    def linear(
        self, rows: torch.Tensor, packed: torch.Tensor, outputs: int, threads: int | None = None
    ) -> torch.Tensor:
        """`rows` [n, in] fp32 times the packed weight of `outputs` outputs (fp16 panels from `pack`, 8-bit panels
        from `pack_int8` or 4-bit ones from `pack_int4`): [n, outputs] fp32, on `threads` threads (`kernel_threads()` by
        default; the result is the same for any)."""
        rows = rows.contiguous()
        inputs = rows.shape[1]
        kind = self.format_of(packed)
        inner = (inputs, PANEL) if kind == "fp16" else (-(-inputs // BLOCK), packed.shape[2])
        if rows.dtype != torch.float32 or packed.shape != (-(-outputs // PANEL), *inner):
            raise ValueError(f"decoding product: rows {rows.dtype} {tuple(rows.shape)}, weight {packed.dtype}"
                             f" {tuple(packed.shape)} for {outputs} outputs")  # fmt: skip
        result = torch.empty(rows.shape[0], outputs, dtype=torch.float32)
        threads = kernel_threads() if threads is None else threads
        if self._linear(rows.data_ptr(), rows.shape[0], inputs, packed.data_ptr(), FORMATS.index(kind), outputs,
                        result.data_ptr(), threads):  # fmt: skip
            raise MemoryError("decoding product: no memory for the rows' integer copies")
        return result

    def attend(
        self, query: torch.Tensor, new_keys: torch.Tensor, new_values: torch.Tensor, keys: torch.Tensor,
        values: torch.Tensor, positions: torch.Tensor, scale: float,
    ) -> torch.Tensor:  # fmt: skip
        """One decoding step's attention: row r's new key and value (`[rows, kv_heads, 1, dim]`) are written into
        the cache (`keys`, `values`: `[rows, kv_heads, capacity, dim]`) at `positions[r]`, then its query
        (`[rows, heads, 1, dim]`) attends over positions 0 .. positions[r]. Returns `[rows, 1, heads, dim]`, the
        layout attention outputs take in transformers. Everything fp32 but the cached values, fp16 (the new value
        rounded to fp16 as it is written, as torch rounds)."""
        rows, heads, _, dim = query.shape
        kv_heads, capacity = keys.shape[1], keys.shape[2]
        query, new_keys, new_values = query.contiguous(), new_keys.contiguous(), new_values.contiguous()
        tensors = (query, new_keys, new_values, keys, values)
        if any(t.dtype != torch.float32 for t in tensors[:4]) or values.dtype != torch.float16:
            raise ValueError("attention kernel: fp32 tensors and fp16 cached values only")
        if not (keys.is_contiguous() and values.is_contiguous()) or values.shape != keys.shape:
            raise ValueError("attention kernel: a contiguous cache of keys and values of one shape only")
        if (
            heads % kv_heads
            or new_keys.shape != (rows, kv_heads, 1, dim)
            or keys.shape != (rows, kv_heads, capacity, dim)
        ):
            raise ValueError(
                f"attention kernel: query {tuple(query.shape)}, keys {tuple(new_keys.shape)}"
                f" into a cache {tuple(keys.shape)}"
            )
        positions = positions.to(torch.int64).contiguous()
        if int(positions.max()) >= capacity or int(positions.min()) < 0:
            raise ValueError(f"attention kernel: positions {positions.tolist()} outside a cache of {capacity}")
        out = torch.empty(rows, 1, heads, dim, dtype=torch.float32)
        failed = self._attention(
            *(t.data_ptr() for t in tensors), positions.data_ptr(), rows, heads, kv_heads, capacity, dim, scale,
            out.data_ptr(), kernel_threads(),
        )  # fmt: skip
        if failed:
            raise MemoryError("attention kernel: no memory for the scores")
        return out

    def pick_greedy(self, logits: torch.Tensor, threads: int | None = None) -> list[tuple[int, float]]:
        """Each row of `logits` `[rows, vocab]`: (its largest logit's id, the first of equal ones or the first NaN, as
        torch's argmax; that token's log-prob under the row's softmax), on `threads` threads (`kernel_threads()` by
        default; the result is the same for any)."""
        logits = logits.to(torch.float32).contiguous()
        if logits.dim() != 2 or logits.shape[1] < 1:
            raise ValueError(f"greedy picking: logits [rows, vocab] wanted, not {tuple(logits.shape)}")
        rows = logits.shape[0]
        tokens, logprobs = (ctypes.c_int64 * rows)(), (ctypes.c_float * rows)()
        threads = kernel_threads() if threads is None else threads
        if self._pick(logits.data_ptr(), rows, logits.shape[1], tokens, logprobs, threads):
            raise MemoryError("greedy picking: no memory for the rows' parts")
        return list(zip(tokens, logprobs, strict=True))


def load_kernel() -> DecodeKernel | None:
    """The kernel for this machine, built on first use; None (said once, in the log) where it cannot be built."""
    return _loaded()[0]


def decoding_method(copies: str) -> str:
    """How decoding steps multiply, for `reef status`: these kernels on the `copies` (`precision.decode_copies`),
    or torch's fp16 product and why (without the kernels there are no int8 copies)."""
    kernel, why = _loaded()
    if kernel is None:
        return f"fp16 weights, torch product ({why})"
    return f"{copies}, reef kernel ({kernel.kind})"


@functools.cache
def _loaded() -> tuple[DecodeKernel | None, str]:
    try:
        return DecodeKernel(ctypes.CDLL(str(_built()))), ""
    except (OSError, subprocess.SubprocessError) as error:
        log.warning(
            "decoding with torch's fp16 product and attention: the decoding kernels are unavailable (%s)", error
        )
        return None, f"no kernel: {error}"


def _built() -> Path:
    compiler = shlex.split(os.environ.get("CC") or "cc")
    key = hashlib.sha256()
    sources = [path.read_bytes() for path in (*SOURCES, *HEADERS)]
    for part in (*sources, " ".join([*compiler, *FLAGS, *LIBRARIES]).encode(), _machine().encode()):
        key.update(hashlib.sha256(part).digest())
    library = kernels_dir() / f"decode_kernel-{key.hexdigest()[:24]}.so"
    if library.is_file():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    log.info("building the decoding kernels for this CPU with %s (once per machine)", compiler[0])
    with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
        built = Path(scratch) / library.name
        result = subprocess.run(
            [*compiler, *FLAGS, "-o", str(built), *map(str, SOURCES), *LIBRARIES],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise OSError(f"{compiler[0]} failed: {(result.stderr or result.stdout).strip()[-500:]}")
        os.replace(built, library)  # whole or absent, also with two daemons building at once
    log.info("built the decoding kernels for this CPU: %s", library)
    return library


def kernels_dir() -> Path:
    """Built kernels of this user, next to the converted models."""
    return user_model_cache().parent / "kernels"


def _machine() -> str:
    """What `-march=native` builds for: the architecture, CPU model and feature flags."""
    identity = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    identity.append(line.strip())
                if line.strip() == "":
                    break  # the first processor describes them all
    except OSError:
        pass
    return "\n".join(identity)
