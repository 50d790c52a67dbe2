"""The decoding kernels: built for this machine, right, and a row's result independent of the rows beside it."""

from __future__ import annotations

import ctypes
import logging
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from reef_daemon.runtimes.embedded import decode_kernel
from reef_daemon.runtimes.embedded.decode_kernel import (
    BLOCK,
    BLOCK_WEIGHT_BYTES,
    PANEL,
    DecodeKernel,
    Int8Panels,
    decoding_method,
    kernel_threads,
    load_kernel,
    torch_on_one_thread,
)
from reef_daemon.runtimes.embedded.precision import DecodeLinear, DecodeWeights
from tests.support.gguf_grid import on_a_gguf_grid

SHAPES = [(576, 576), (70, 33), (1, 5), (49, 1536)]  # (outputs, inputs): whole panels, ragged ones, a single output


@pytest.fixture
def fresh_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A kernel cache of its own and no kernel loaded yet; the loaded one is forgotten again afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    decode_kernel._loaded.cache_clear()
    yield tmp_path / "reef" / "kernels"
    decode_kernel._loaded.cache_clear()


def _kernel() -> DecodeKernel:
    kernel = load_kernel()
    assert kernel is not None, decoding_method("fp16 weights")
    return kernel


@pytest.mark.parametrize(("outputs", "inputs"), SHAPES)
def test_products_match_fp32_arithmetic_on_the_fp16_weights(outputs: int, inputs: int) -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(outputs * inputs)
    weight = torch.randn(outputs, inputs, generator=generator) * 0.05
    rows = torch.randn(7, inputs, generator=generator)
    expected = rows.double() @ weight.to(torch.float16).double().T
    got = kernel.linear(rows, kernel.pack(weight), outputs)
    assert got.shape == (7, outputs)
    assert torch.allclose(got.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("outputs", "inputs"), SHAPES)
def test_a_row_gets_the_same_bits_alone_or_in_any_batch(outputs: int, inputs: int) -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(7)
    packed = kernel.pack(torch.randn(outputs, inputs, generator=generator))
    rows = torch.randn(9, inputs, generator=generator)
    alone = torch.cat([kernel.linear(rows[r : r + 1], packed, outputs) for r in range(9)])
    for count in range(1, 10):
        assert torch.equal(kernel.linear(rows[:count], packed, outputs), alone[:count]), f"{count} rows"
    order = torch.randperm(9, generator=generator)
    assert torch.equal(kernel.linear(rows[order], packed, outputs), alone[order])
    for threads in (2, 3, 8):
        assert torch.equal(kernel.linear(rows, packed, outputs, threads=threads), alone), f"{threads} threads"


def int8_grids(packed: Int8Panels) -> torch.Tensor:
    """Each output's scale and minimum per block, as 8-bit panels hold them: [outputs, (scale, minimum), blocks]."""
    panels = packed.panels
    grids = panels[:, :, BLOCK_WEIGHT_BYTES:].contiguous().view(torch.float16)  # [panels, blocks, 2 * PANEL]
    return grids.view(panels.shape[0], panels.shape[1], 2, PANEL).permute(0, 3, 2, 1).reshape(-1, 2, panels.shape[1])


def int8_parts(packed: Int8Panels, outputs: int, inputs: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What 8-bit panels hold for weight n, input k: its byte q, its block's scale and its block's minimum."""
    panels = packed.panels
    bytes_ = panels[:, :, :BLOCK_WEIGHT_BYTES].reshape(panels.shape[0], panels.shape[1], BLOCK // 2, PANEL, 2)
    q = bytes_.permute(0, 3, 1, 2, 4).reshape(-1, panels.shape[1] * BLOCK)[:outputs, :inputs].float()
    grids = int8_grids(packed)
    step, low = (grids[:outputs, part].repeat_interleave(BLOCK, 1)[:, :inputs].float() for part in (0, 1))
    return q, step, low


def dequantised(packed: Int8Panels, outputs: int, inputs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights the kernel reads back from 8-bit panels (q * its block's scale + its block's minimum, rounded once
    to fp32 as the kernel's fused multiply-add rounds it), and each weight's step."""
    q, step, low = int8_parts(packed, outputs, inputs)
    return q * step + low, step  # q * step is exact in fp32 (a byte times an fp16): one rounding, in the sum


def assert_int8_product(got: torch.Tensor, rows: torch.Tensor, packed: Int8Panels, outputs: int) -> None:
    """`got` is `rows` times the 8-bit copy in fp32 arithmetic, each input taken to within half a step of its block's
    largest / 32767, as documented: off by at most the sum over inputs of that half step times q * s, and fp32's own
    rounding. Half a step is 2^-16 of the block's largest input: far below what fp16 copies of the weights lose."""
    inputs = rows.shape[1]
    q, step, low = int8_parts(packed, outputs, inputs)
    blocks = -(-inputs // BLOCK)
    padded = F.pad(rows.abs(), (0, blocks * BLOCK - inputs)).view(rows.shape[0], blocks, BLOCK)
    half_steps = (padded.amax(-1) / 32767 / 2).repeat_interleave(BLOCK, 1)[:, :inputs]
    bound = half_steps.double() @ (q * step).double().abs().T
    exact = rows.double() @ (q * step + low).double().T
    assert ((got.double() - exact).abs() <= bound * 1.001 + exact.abs() * 1e-5 + 1e-5).all()


@pytest.mark.parametrize(("outputs", "inputs"), SHAPES)
def test_int8_products_match_fp32_arithmetic_on_the_dequantised_weights(outputs: int, inputs: int) -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(outputs + inputs)
    weight = torch.randn(outputs, inputs, generator=generator) * 0.05
    rows = torch.randn(7, inputs, generator=generator)
    packed = kernel.pack_int8(weight)
    back, step = dequantised(packed, outputs, inputs)
    # The nearest of 256 levels, give or take the minimum's rounding to fp16 (all there is in a block of one).
    assert ((back - weight).abs() <= step / 2 + weight.abs().max() * 2**-11).all()
    assert packed.inexact > 0 and kernel.pack_int8(weight, exact_only=True) is None
    got = kernel.linear(rows, packed.panels, outputs)
    assert_int8_product(got, rows, packed, outputs)
    alone = torch.cat([kernel.linear(rows[r : r + 1], packed.panels, outputs) for r in range(7)])
    assert torch.equal(got, alone)


@pytest.mark.parametrize("magnitude", [1e-7, 1e-3, 1.0, 3e4])  # fp16's subnormals, its normals, past its largest
def test_a_block_off_every_grid_keeps_torch_s_fp16_minimum_and_range_over_255(magnitude: float) -> None:
    kernel = _kernel()
    weight = torch.randn(64, 96, generator=torch.Generator().manual_seed(0)) * magnitude
    packed = kernel.pack_int8(weight)
    assert packed.inexact == 64 * 3
    blocks = weight.view(64, 3, BLOCK)
    low = blocks.amin(-1).to(torch.float16)
    step = ((blocks.amax(-1) - low.float()) / 255).to(torch.float16)
    written = int8_grids(packed)
    assert torch.equal(written[:, 1].view(torch.int16), low.view(torch.int16))
    assert torch.equal(written[:, 0].view(torch.int16), step.view(torch.int16))


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
@pytest.mark.parametrize(("outputs", "inputs"), SHAPES)
def test_weights_from_a_gguf_s_blocks_come_back_bit_for_bit(outputs: int, inputs: int, kind: str) -> None:
    """A GGUF's Q4_1 and Q8_0 weights are bytes on a grid already: their 8-bit copy is the weight itself, so the
    product is fp32 arithmetic on the very weights that train."""
    kernel = _kernel()
    generator = torch.Generator().manual_seed(outputs * 3 + inputs)
    weight = on_a_gguf_grid(outputs, inputs, kind, generator)
    packed = kernel.pack_int8(weight, exact_only=True)
    assert packed is not None and packed.inexact == 0
    assert torch.equal(dequantised(packed, outputs, inputs)[0], weight)
    rows = torch.randn(5, inputs, generator=generator)
    got = kernel.linear(rows, packed.panels, outputs)
    assert_int8_product(got, rows, packed, outputs)
    moved = weight.clone()
    moved[outputs // 2, inputs // 2] += 1e-5  # one weight off its grid, as a training step moves weights
    assert kernel.pack_int8(moved, exact_only=True) is None
    assert kernel.pack_int8(moved).inexact == 1


@pytest.mark.parametrize(("outputs", "inputs"), SHAPES)
def test_weights_on_16_steps_get_4_bit_copies_with_the_bits_of_their_8_bit_ones(outputs: int, inputs: int) -> None:
    """A GGUF's Q4_1 weights fit two to a byte: their 4-bit copy reads 0.56x the bytes and multiplies to the very
    bits of the 8-bit copy, alone or in any batch and on any number of threads; Q8_0's bytes do not fit."""
    kernel = _kernel()
    generator = torch.Generator().manual_seed(outputs * 5 + inputs)
    bytes_ = kernel.pack_int8(on_a_gguf_grid(outputs, inputs, "q4_1", generator), exact_only=True)
    assert bytes_ is not None
    nibbles = kernel.pack_int4(bytes_.panels)
    assert nibbles is not None and kernel.format_of(nibbles) == "int4"
    assert nibbles.numel() / bytes_.panels.numel() == pytest.approx(640 / 1152)
    rows = torch.randn(9, inputs, generator=generator)
    eight = kernel.linear(rows, bytes_.panels, outputs)
    for count in range(1, 10):
        assert torch.equal(kernel.linear(rows[:count], nibbles, outputs), eight[:count]), f"{count} rows"
    for threads in (1, 3):
        assert torch.equal(kernel.linear(rows, nibbles, outputs, threads=threads), eight), f"{threads} threads"
    assert kernel.pack_int4(kernel.pack_int8(on_a_gguf_grid(outputs, inputs, "q8_0", generator)).panels) is None


def test_auto_copies_take_the_fewest_bits_that_hold_the_weight_and_fp16_once_it_moves() -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(11)
    linear = nn.Linear(64, 40, bias=False)
    grid = on_a_gguf_grid(40, 64, "q4_1", generator)
    x = torch.randn(3, 1, 64, generator=generator)
    with torch.no_grad():
        linear.weight.copy_(grid)
        layer = DecodeLinear(linear, kernel, "auto")
        assert layer.copy_format == "int4"
        bytes_ = kernel.pack_int8(grid)
        assert torch.equal(layer(x).view(3, 40), kernel.linear(x.view(3, 64), bytes_.panels, 40))
        assert_int8_product(layer(x).view(3, 40), x.view(3, 64), bytes_, 40)
        linear.weight.add_(torch.randn(40, 64, generator=generator) * 1e-3)
        layer.refresh()
        assert layer.copy_format == "fp16"
        fp16 = x.double() @ linear.weight.to(torch.float16).double().T
        assert torch.allclose(layer(x).double(), fp16, rtol=1e-5, atol=1e-5)
        linear.weight.copy_(on_a_gguf_grid(40, 64, "q8_0", generator))  # a weight on 256 steps
        layer.refresh()
        assert layer.copy_format == "int8"
        linear.weight.copy_(grid)  # rolled back to the weights as read
        layer.refresh()
        assert layer.copy_format == "int4"
        assert DecodeLinear(linear, kernel, "int8").copy_format == "int8"  # asked for: bytes, even where 4 bits hold


@pytest.mark.parametrize("weights", ["fp16", "int8"])
def test_decoding_layers_follow_a_weight_change(weights: DecodeWeights) -> None:
    kernel = _kernel()
    linear = nn.Linear(40, 50)
    layer = DecodeLinear(linear, kernel, weights)
    x = torch.randn(3, 1, 40)
    tolerance = 3e-2 if weights == "int8" else 1e-2
    with torch.no_grad():
        assert torch.allclose(layer(x), linear(x), atol=tolerance)
        linear.weight.mul_(-2)
        layer.refresh()
        assert torch.allclose(layer(x), linear(x), atol=2 * tolerance)
        long = torch.randn(1, 9, 40)  # more positions than a decoding step: the fp32 weights
        assert torch.equal(layer(long), linear(long))


def test_built_once_per_machine_and_reused(fresh_build: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="reef.embedded"):
        assert load_kernel() is not None
    said = [record.getMessage() for record in caplog.records]
    assert said[0].startswith("building the decoding kernels for this CPU with ")  # before the wait, not after
    assert said[-1].startswith("built the decoding kernels for this CPU: ")
    (library,) = fresh_build.glob("decode_kernel-*.so")
    built = library.stat()
    decode_kernel._loaded.cache_clear()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="reef.embedded"):
        assert load_kernel() is not None
    assert not any("kernel" in record.getMessage() for record in caplog.records)
    assert [p.name for p in fresh_build.iterdir()] == [library.name]  # no scratch left behind
    assert library.stat().st_mtime_ns == built.st_mtime_ns and library.stat().st_ino == built.st_ino


def test_the_portable_kernel_is_exact_per_row_too(fresh_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the CPU lacks AVX2/F16C/FMA the C fallback builds; its rows do not depend on the batch either."""
    if os.uname().machine in ("x86_64", "AMD64"):  # elsewhere the fallback is what builds anyway
        monkeypatch.setenv("CC", f"{os.environ.get('CC') or 'cc'} -mno-avx2 -mno-f16c -mno-fma")
    kernel = _kernel()
    assert kernel.kind == "portable"
    generator = torch.Generator().manual_seed(3)
    weight = torch.randn(70, 33, generator=generator)
    packed = kernel.pack(weight)
    rows = torch.randn(5, 33, generator=generator)
    alone = torch.cat([kernel.linear(rows[r : r + 1], packed, 70) for r in range(5)])
    assert torch.equal(kernel.linear(rows, packed, 70), alone)
    assert torch.allclose(alone.double(), rows.double() @ weight.to(torch.float16).double().T, rtol=1e-5, atol=1e-5)
    panels, _ = kernel.pack_int8(weight)
    int8 = torch.cat([kernel.linear(rows[r : r + 1], panels, 70) for r in range(5)])
    assert torch.equal(kernel.linear(rows, panels, 70), int8)
    assert kernel.pack_int8(on_a_gguf_grid(70, 33, "q8_0", generator), exact_only=True) is not None
    grid, _ = kernel.pack_int8(on_a_gguf_grid(70, 33, "q4_1", generator))
    nibbles = kernel.pack_int4(grid)
    assert nibbles is not None
    int4 = torch.cat([kernel.linear(rows[r : r + 1], nibbles, 70) for r in range(5)])
    assert torch.equal(kernel.linear(rows, nibbles, 70), int4)
    assert torch.equal(int4, kernel.linear(rows, grid, 70))
    query, new_keys, new_values, keys, values, positions = _attention_case(generator, [4, 0, 9], dim=20)
    one = kernel.attend(query[1:2], new_keys[1:2], new_values[1:2], keys[1:2].clone(), values[1:2].clone(),
                        positions[1:2], 0.5)  # fmt: skip
    assert torch.equal(kernel.attend(query, new_keys, new_values, keys, values, positions, 0.5)[1:2], one)


def _silu_times(kernel: DecodeKernel, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up as the decoding layers take it (`reef_silu_mul`)."""
    out = gate.contiguous().clone()
    kernel.library.reef_silu_mul(ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(up.contiguous().data_ptr()),
                                 ctypes.c_int64(out.numel()))  # fmt: skip
    return out


def _rms_norm(kernel: DecodeKernel, rows: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The decoding layers' RMS norm of each row (`reef_rms_norm`)."""
    rows = rows.contiguous()
    out = torch.empty_like(rows)
    kernel.library.reef_rms_norm(ctypes.c_void_p(rows.data_ptr()), ctypes.c_int64(rows.shape[0]),
                                 ctypes.c_int64(rows.shape[1]), ctypes.c_void_p(weight.data_ptr()),
                                 ctypes.c_float(eps), ctypes.c_void_p(out.data_ptr()))  # fmt: skip
    return out


def _mlp_inputs(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Gate and up values as an MLP meets them, with the far ends of the exponential and a ragged tail."""
    gate = torch.cat([torch.randn(4093, generator=generator) * 6, torch.tensor([0.0, -0.0, 30.0, -30.0, 87.5])])
    return gate, torch.randn(gate.shape[0], generator=generator)


def test_the_mlp_s_silu_and_the_norms_match_torch() -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(21)
    gate, up = _mlp_inputs(generator)
    expected = F.silu(gate.double()) * up.double()
    got = _silu_times(kernel, gate, up).double()
    assert torch.allclose(got, expected, rtol=1e-6, atol=1e-30)
    nan = _silu_times(kernel, torch.tensor([float("nan")] * 9), torch.ones(9))
    assert torch.isnan(nan).all()
    rows, weight = torch.randn(5, 579, generator=generator), torch.rand(579, generator=generator) + 0.5
    norm = rows.double() * torch.rsqrt(rows.double().pow(2).mean(-1, keepdim=True) + 1e-5) * weight.double()
    assert torch.allclose(_rms_norm(kernel, rows, weight, 1e-5).double(), norm, rtol=1e-6, atol=1e-7)


NARROWER_BUILDS = [
    ("-mno-avx512vnni", "avx512-f16c-fma"),
    ("-mno-avx512f", "avx2-f16c-fma"),
    ("-mno-avx512f -mno-avx2 -mno-f16c -mno-fma", "portable"),
]


@pytest.mark.parametrize(("flags", "kind"), NARROWER_BUILDS)
def test_narrower_builds_give_the_same_bits(
    flags: str, kind: str, fresh_build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine with AVX-512 and VNNI decodes with them; its rows get the bits that AVX-512 without VNNI, AVX2 and
    (for the 8-bit and 4-bit copies, whose sums are integers; the MLP's silu and the norms) the portable C give them,
    and the weights pack the same."""
    kernel = _kernel()
    if kernel.kind != "avx512-vnni-f16c-fma":
        pytest.skip(f"this CPU builds the {kernel.kind} kernel: the widest path is not here to compare with")
    generator = torch.Generator().manual_seed(13)
    weight = torch.randn(200, 97, generator=generator)
    rows = torch.randn(7, 97, generator=generator)
    wide = kernel.linear(rows, kernel.pack(weight), 200)
    grid = on_a_gguf_grid(200, 97, "q4_1", generator)
    panels, _ = kernel.pack_int8(weight)
    wide_int8 = kernel.linear(rows, panels, 200)
    nibbles = kernel.pack_int4(kernel.pack_int8(grid).panels)
    assert nibbles is not None
    wide_int4 = kernel.linear(rows, nibbles, 200)
    gate, up = _mlp_inputs(generator)
    wide_silu = _silu_times(kernel, gate, up)
    norm_weight = torch.rand(97, generator=generator) + 0.5
    wide_norm = _rms_norm(kernel, rows, norm_weight, 1e-5)
    decode_kernel._loaded.cache_clear()
    monkeypatch.setenv("CC", f"{os.environ.get('CC') or 'cc'} {flags}")
    narrow = _kernel()
    assert narrow.kind == kind
    if kind != "portable":  # the portable fp16 product rounds each product and sum apart: no fused multiply-add
        assert torch.equal(narrow.linear(rows, narrow.pack(weight), 200), wide)
    assert torch.equal(narrow.linear(rows, panels, 200), wide_int8)
    assert torch.equal(narrow.linear(rows, nibbles, 200), wide_int4)
    assert torch.equal(_silu_times(narrow, gate, up), wide_silu)  # the MLP's exponential is the same in every build
    assert torch.equal(_rms_norm(narrow, rows, norm_weight, 1e-5), wide_norm)
    for packing in (weight, grid):  # the weights are packed the same whatever the CPU
        there, here = narrow.pack_int8(packing), kernel.pack_int8(packing)
        assert torch.equal(there.panels, here.panels)
        assert there.inexact == here.inexact
    there_nibbles = narrow.pack_int4(narrow.pack_int8(grid).panels)
    assert there_nibbles is not None and torch.equal(there_nibbles, nibbles)


def test_without_a_compiler_decoding_uses_torch_and_says_why(
    fresh_build: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert load_kernel() is None
    assert decoding_method("int8 weights").startswith("fp16 weights, torch product (no kernel: ")
    assert "/nonexistent/cc" in decoding_method("int8 weights")
    assert any("the decoding kernels are unavailable" in r.getMessage() for r in caplog.records)
    linear = nn.Linear(16, 8)
    layer = DecodeLinear(linear, None)
    x = torch.randn(2, 1, 16)
    with torch.no_grad():
        assert torch.allclose(layer(x), linear(x), atol=1e-2)


def test_a_failing_build_says_what_the_compiler_said(fresh_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", f"{os.environ.get('CC') or 'cc'} -DREEF_NO_SUCH_FLAG -fno-such-option")
    assert load_kernel() is None
    assert "failed" in decoding_method("int8 weights") and "no-such-option" in decoding_method("int8 weights")
    assert not list(fresh_build.glob("decode_kernel-*.so"))


def test_a_decoding_step_s_torch_operations_run_on_one_thread_and_the_kernels_on_torch_s_count() -> None:
    """OpenMP workers left spinning by a torch operation would take the cores the kernels' threads need: within a
    step torch runs on one thread, the kernels on as many as outside it, and both are as before afterwards."""
    outside = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        with torch_on_one_thread():
            assert torch.get_num_threads() == 1
            assert kernel_threads() == 3
            with torch_on_one_thread():  # within a step's part that says so again
                assert torch.get_num_threads() == 1 and kernel_threads() == 3
            assert torch.get_num_threads() == 1 and kernel_threads() == 3
        assert torch.get_num_threads() == 3 and kernel_threads() == 3
        with pytest.raises(RuntimeError), torch_on_one_thread():
            raise RuntimeError("a step failed")
        assert torch.get_num_threads() == 3 and kernel_threads() == 3
    finally:
        torch.set_num_threads(outside)


def test_products_from_several_threads_at_once_stay_right() -> None:
    """Two models in one process decode on two threads: their products may overlap and must not mix."""
    kernel = _kernel()
    generator = torch.Generator().manual_seed(11)
    weights = [torch.randn(outputs, 64, generator=generator) for outputs in (96, 200, 576)]
    packed = [kernel.pack(w) for w in weights]
    rows = torch.randn(5, 64, generator=generator)
    expected = [kernel.linear(rows, p, w.shape[0], threads=1) for w, p in zip(weights, packed, strict=True)]

    def products(offset: int) -> bool:
        return all(
            torch.equal(kernel.linear(rows, packed[(i + offset) % 3], weights[(i + offset) % 3].shape[0], threads=3),
                        expected[(i + offset) % 3])
            for i in range(300)
        )  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(products, range(4)))


def test_back_to_back_products_on_shared_threads_each_get_their_own_bits() -> None:
    """The threads taking part in a product claim its panels as they go; a helper that comes late, after its product
    is over, must claim nothing of it nor of the next one; one that the system runs less has its share taken by the
    others. Thousands of small products in a row, each with its own rows and weight, on 2 and 3 threads, and on 8
    (more than the cores, so that some are descheduled mid-product): every one gets the bits it gets alone."""
    kernel = _kernel()
    generator = torch.Generator().manual_seed(12)
    weights = [torch.randn(outputs, 64, generator=generator) for outputs in (64, 96, 160)]
    packed = [kernel.pack_int8(w).panels for w in weights]
    rows = [torch.randn(count, 64, generator=generator) for count in (1, 2, 4)]
    cases = [(r, p, w.shape[0]) for r in rows for p, w in zip(packed, weights, strict=True)]
    expected = [kernel.linear(r, p, n, threads=1) for r, p, n in cases]
    for threads in (2, 3, 8):
        for round_ in range(300):
            for case, alone in zip(cases, expected, strict=True):
                assert torch.equal(kernel.linear(*case, threads=threads), alone), f"{threads} threads, {round_}"


def test_greedy_picks_are_torch_s_argmax_with_its_log_prob_on_any_threads() -> None:
    """The greedy token and its log-prob from the kernels: torch's argmax (the first of equal logits, the first NaN)
    and log_softmax at it, the same bits on any number of threads and beside any rows."""
    kernel = _kernel()
    generator = torch.Generator().manual_seed(31)
    logits = torch.randn(6, 49155, generator=generator) * 4  # SmolLM2's vocabulary and a ragged last part
    logits[1, 30000] = logits[1, 9] = logits[1].max() + 1  # equal largest logits in two parts: the first
    logits[2, :] = -3.0  # all equal
    logits[3, 40000] = float("nan")  # a NaN after the largest logit: torch's argmax takes the NaN
    logits[4, 12000:] = float("-inf")
    picks = kernel.pick_greedy(logits, threads=1)
    expected_tokens = torch.argmax(logits, dim=-1).tolist()
    assert [token for token, _ in picks] == expected_tokens == [expected_tokens[0], 9, 0, 40000, *expected_tokens[4:]]
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    for row, (token, logprob) in enumerate(picks):
        if row == 3:
            assert math.isnan(logprob)
        else:
            assert logprob == pytest.approx(float(log_probs[row, token]), abs=2e-6), row
    for threads in (2, 3):
        assert _same_with_nan(kernel.pick_greedy(logits, threads=threads), picks)
    assert _same_with_nan([kernel.pick_greedy(logits[r : r + 1], threads=2)[0] for r in range(6)], picks)


def _same_with_nan(got: list[tuple[int, float]], expected: list[tuple[int, float]]) -> bool:
    """The same picks, a NaN log-prob equal to a NaN."""
    return all(
        g[0] == e[0] and (g[1] == e[1] or (math.isnan(g[1]) and math.isnan(e[1])))
        for g, e in zip(got, expected, strict=True)
    )


def _attention_case(
    generator: torch.Generator, positions: list[int], heads: int = 9, kv_heads: int = 3, dim: int = 64
) -> tuple[torch.Tensor, ...]:
    """A query per row, its new key and value, and a cache of `capacity` positions holding earlier ones (the keys in
    fp32, the values in fp16)."""
    rows, capacity = len(positions), max(positions) + 5
    query = torch.randn(rows, heads, 1, dim, generator=generator)
    new_keys, new_values = (torch.randn(rows, kv_heads, 1, dim, generator=generator) for _ in range(2))
    keys, values = (torch.randn(rows, kv_heads, capacity, dim, generator=generator) for _ in range(2))
    return query, new_keys, new_values, keys, values.half(), torch.tensor(positions)


@pytest.mark.parametrize("dim", [64, 20, 72])  # whole registers, and parts of one (the scalar tails)
@pytest.mark.parametrize("rows", [[0, 6, 40, 17], [1100, 511, 512, 30]])  # long rows are attended in parts
def test_attention_writes_the_new_keys_and_attends_over_each_rows_own_positions(dim: int, rows: list[int]) -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(5)
    query, new_keys, new_values, keys, values, positions = _attention_case(generator, rows, dim=dim)
    before_keys, before_values = keys.clone(), values.clone()
    got = kernel.attend(query, new_keys, new_values, keys, values, positions, 0.125)
    assert got.shape == (4, 1, 9, dim)
    for row, position in enumerate(positions.tolist()):
        assert torch.equal(keys[row, :, position], new_keys[row, :, 0])
        assert torch.equal(values[row, :, position], new_values[row, :, 0].half())  # rounded as torch rounds
        assert torch.equal(keys[row, :, position + 1 :], before_keys[row, :, position + 1 :])  # nothing else
        assert torch.equal(values[row, :, :position], before_values[row, :, :position])
        span_keys = keys[row : row + 1, :, : position + 1].repeat_interleave(3, dim=1).double()
        span_values = values[row : row + 1, :, : position + 1].repeat_interleave(3, dim=1).double()
        expected = torch.nn.functional.scaled_dot_product_attention(
            query[row : row + 1].double(), span_keys, span_values, scale=0.125
        )  # [1, heads, 1, dim]
        assert torch.allclose(got[row, 0].double(), expected[0, :, 0], rtol=1e-5, atol=1e-6), f"row {row}"


def test_a_rows_attention_is_the_same_bits_alone_or_in_any_batch() -> None:
    kernel = _kernel()
    generator = torch.Generator().manual_seed(9)
    case = _attention_case(generator, [3, 300, 0, 700, 7])  # long rows are shared out among threads
    query, new_keys, new_values, keys, values, positions = case
    alone = torch.cat([
        kernel.attend(query[r : r + 1], new_keys[r : r + 1], new_values[r : r + 1], keys[r : r + 1].clone(),
                      values[r : r + 1].clone(), positions[r : r + 1], 0.125)
        for r in range(5)
    ])  # fmt: skip
    together = kernel.attend(query, new_keys, new_values, keys.clone(), values.clone(), positions, 0.125)
    assert torch.equal(together, alone)
    order = torch.tensor([4, 2, 0, 3, 1])
    query, new_keys, new_values, keys, values = (t[order] for t in case[:5])
    reordered = kernel.attend(query, new_keys, new_values, keys, values, positions[order], 0.125)
    assert torch.equal(reordered, alone[order])


def test_attention_refuses_positions_outside_the_cache_and_values_not_in_fp16() -> None:
    kernel = _kernel()
    query, new_keys, new_values, keys, values, _ = _attention_case(torch.Generator().manual_seed(1), [2, 3])
    with pytest.raises(ValueError, match="outside a cache"):
        kernel.attend(query, new_keys, new_values, keys, values, torch.tensor([2, keys.shape[2]]), 0.125)
    with pytest.raises(ValueError, match="fp16 cached values"):
        kernel.attend(query, new_keys, new_values, keys, values.float(), torch.tensor([2, 3]), 0.125)
