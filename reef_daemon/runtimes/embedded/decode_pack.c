/* Packing a weight into the 8-bit format that reef_linear reads (decode_format.h): a byte q per weight, and per
 * output and block of BLOCK inputs an fp16 scale s and minimum m, the weight standing for fmaf(q, s, m).
 *
 * Weights read from a quantised file are already bytes on such a grid: a GGUF's Q4_1 block is d * q + m for a
 * 4-bit q, and its Q8_0 block d * q for a signed byte, with d and m in fp16. Dequantised to fp32 they come back
 * bit for bit from the right (s, m): (d, m) for Q4_1, (d, -128 d) with q + 128 for Q8_0. So each block tries those
 * two grids, found from its own range, and keeps the first that gives back every weight of the block exactly; a
 * block on neither (weights that training moved, or a model that was never quantised) gets its range over 255 and
 * its minimum, and comes back to within half a step. The count of such blocks says whether a copy is exact. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "decode_format.h"
#include "decode_half.h"

typedef struct {
    float scale, minimum;
} grid_t;

/* How far the block's weights are from the grid: 0 when fmaf(q, s, m) gives each one back, with q its byte. */
static int off_grid(const float *w, int count, grid_t grid, uint8_t *q) {
    float inverse = grid.scale > 0.0f ? 1.0f / grid.scale : 0.0f;
    int missed = 0;
    for (int i = 0; i < count; i++) {
        float step = rintf((w[i] - grid.minimum) * inverse);
        step = step >= 0.0f ? (step <= 255.0f ? step : 255.0f) : 0.0f; /* a NaN weight too gets a byte */
        q[i] = (uint8_t)step;
        missed |= fmaf(step, grid.scale, grid.minimum) != w[i];
    }
    return missed;
}

static grid_t halves(float scale, float minimum) {
    return (grid_t){half_to_float(float_to_half(scale)), half_to_float(float_to_half(minimum))};
}

/* One block: its bytes in q and its grid; returns 1 where the weights do not come back exactly. */
static int pack_block(const float *w, int count, uint8_t *q, grid_t *chosen) {
    float low = w[0], high = w[0];
    for (int i = 1; i < count; i++) { /* NaN weights are skipped (and then come back from no grid) */
        low = w[i] < low ? w[i] : low;
        high = w[i] > high ? w[i] : high;
    }
    float largest = -low > high ? -low : high;
    grid_t four_bit = halves((high - low) / 15.0f, low);
    float d = half_to_float(float_to_half(largest / 127.0f));
    grid_t signed_byte = {d, -128.0f * d};
    if (four_bit.minimum == low && !off_grid(w, count, four_bit, q)) {
        *chosen = four_bit;
        return 0;
    }
    if (!off_grid(w, count, signed_byte, q)) {
        *chosen = signed_byte;
        return 0;
    }
    float minimum = half_to_float(float_to_half(low));
    grid_t bytes = {half_to_float(float_to_half((high - minimum) / 255.0f)), minimum};
    *chosen = bytes;
    return off_grid(w, count, bytes, q);
}

/* weight: outputs x inputs fp32. panels: ceil(outputs / PANEL) panels of ceil(inputs / BLOCK) blocks of BLOCK_BYTES
 * (decode_format.h), zeroed by the caller (the outputs past the last, and the inputs past the last, stay zero).
 * Returns the number of blocks whose weights do not come back exactly; with `exact_only`, 1 at the first such block,
 * the rest left unpacked (a copy that would not be exact is not wanted then). */
int64_t reef_pack_q8(const float *weight, int64_t outputs, int64_t inputs, uint8_t *panels, int exact_only) {
    int64_t blocks = (inputs + BLOCK - 1) / BLOCK, inexact = 0;
    uint8_t q[BLOCK];
    for (int64_t n = 0; n < outputs; n++) {
        int64_t lane = n % PANEL;
        uint8_t *panel = panels + n / PANEL * blocks * BLOCK_BYTES;
        for (int64_t b = 0; b < blocks; b++) {
            int64_t first = b * BLOCK;
            int count = (int)(inputs - first < BLOCK ? inputs - first : BLOCK);
            grid_t grid;
            inexact += pack_block(weight + n * inputs + first, count, q, &grid);
            if (inexact && exact_only) return inexact;
            uint8_t *bytes = panel + b * BLOCK_BYTES;
            for (int i = 0; i < count; i++) bytes[i / 2 * PANEL * 2 + lane * 2 + i % 2] = q[i];
            uint16_t scale = float_to_half(grid.scale), minimum = float_to_half(grid.minimum);
            memcpy(bytes + BLOCK_WEIGHT_BYTES + lane * 2, &scale, sizeof scale);
            memcpy(bytes + BLOCK_WEIGHT_BYTES + (PANEL + lane) * 2, &minimum, sizeof minimum);
        }
    }
    return inexact;
}

/* The 4-bit panels (decode_format.h) of a weight's 8-bit panels (`reef_pack_q8`, `panel_count` panels of `blocks`
 * blocks each): the same weights, scales and minimums in 0.56x the bytes. Returns 0, or 1 where a byte is 16 or more
 * (the weight does not fit in 4 bits; `nibbles` is then not wholly written). */
int reef_pack_q4(const uint8_t *bytes, int64_t panel_count, int64_t blocks, uint8_t *nibbles) {
    for (int64_t block = 0; block < panel_count * blocks; block++) {
        const uint8_t *from = bytes + block * BLOCK_BYTES;
        uint8_t *to = nibbles + block * NIBBLE_BLOCK_BYTES;
        for (int pair = 0; pair < BLOCK_PAIRS; pair += 2) {
            const uint8_t *first = from + pair * 2 * PANEL, *second = first + 2 * PANEL;
            for (int i = 0; i < 2 * PANEL; i++) {
                uint8_t low = first[i], high = pair + 1 < BLOCK_PAIRS ? second[i] : 0;
                if ((low | high) > 15) return 1;
                to[pair / 2 * 2 * PANEL + i] = (uint8_t)(low | high << 4);
            }
        }
        memcpy(to + NIBBLE_WEIGHT_BYTES, from + BLOCK_WEIGHT_BYTES, 2 * PANEL * 2);
    }
    return 0;
}
