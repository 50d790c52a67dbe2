/* How the decoding kernels' weights are laid out, for the product (decode_kernel.c) and the packing (decode_pack.c).
 *
 * fp16: panels of PANEL outputs; panel p holds, for every input k in order, the PANEL weights W[p * PANEL + j][k].
 *
 * 8 bits: panels of PANEL outputs, each a run of blocks of BLOCK inputs; a block is BLOCK_WEIGHT_BYTES of weight
 * bytes (for each pair of inputs 2i, 2i + 1 in the block, every output's two bytes side by side, as the integer
 * multiply-adds take them), then the block's PANEL fp16 scales and PANEL fp16 minimums, so a pass over a panel reads
 * one stream. Zero past the last output and the last input.
 *
 * 4 bits: the 8-bit format with two weights a byte, for weights whose bytes are all under 16 (a GGUF's Q4_1 blocks):
 * in a block, for each two pairs of inputs (2i, 2i + 1 and 2i + 2, 2i + 3), the 2 * PANEL bytes of the first pair
 * as the 8-bit format lays them out, each with the second pair's byte at the same place in its high nibble; then the
 * block's scales and minimums as in the 8-bit format. An odd last pair's partner is zero. */
#ifndef REEF_DECODE_FORMAT_H
#define REEF_DECODE_FORMAT_H

#define PANEL 32
#define BLOCK 32 /* inputs sharing one scale and minimum per output in the 8-bit format */
#define BLOCK_PAIRS (BLOCK / 2)
#define BLOCK_WEIGHT_BYTES (BLOCK_PAIRS * 2 * PANEL)
#define BLOCK_BYTES (BLOCK_WEIGHT_BYTES + 2 * PANEL * 2)
#define NIBBLE_WEIGHT_BYTES ((BLOCK_PAIRS + 1) / 2 * 2 * PANEL)
#define NIBBLE_BLOCK_BYTES (NIBBLE_WEIGHT_BYTES + 2 * PANEL * 2)

/* A packed weight's format, as the products are told it. */
#define FORMAT_HALF 0
#define FORMAT_BYTE 1
#define FORMAT_NIBBLE 2

#endif
