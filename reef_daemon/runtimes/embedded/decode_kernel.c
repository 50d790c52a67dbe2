/* The decoding kernels: the linear layers' product (reef_linear) and attention (reef_decode_attention) of a
 * decoding step, whose rows each get the same bits alone or in any batch.
 *
 * y = x W^T for decoding: fp32 inputs, fp16 (or 8-bit or 4-bit, see reef_linear) weights, fp32 sums, one pass over
 * the weights for every row.
 *
 * fp16 weights are packed in panels of PANEL output features (decode_format.h): panel p holds, for every input k in
 * order, the PANEL weights W[p * PANEL + j][k] (fp16 bits, zero past the last feature). Each output y[r][n] is the sum
 * over k = 0, 1, ..., K - 1, in that order, of x[r][k] * W[n][k], each step one fused multiply-add in fp32 (or, without
 * FMA, a multiply and an add, each rounded). Rows are handled a few at a time, but the order and rounding of one
 * output's sum never depend on how many rows there are or which rows share a pass: a row gets the same bits alone or in
 * any batch. The weights of a panel are read once per group of rows and converted to fp32 in registers. The AVX-512 and
 * AVX2 paths sum an output the same way (one fused multiply-add per k, in order): they agree bit for bit. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode_format.h"
#include "decode_half.h"

/* Pairs of inputs the 8-bit passes of FETCHING_ROWS rows or more fetch ahead: the products of several rows keep the
 * core busy enough that nearer fetches leave it waiting on memory (4 rows: 9.6-10.1 ms for all of SmolLM2's weights
 * on one core at 32, 11.5-11.8 at 8, 11.7-12.5 with none). Passes of fewer rows leave the fetching to the hardware,
 * which streams the weights faster on its own (one row on two cores: ~6 % faster without these fetches). */
#define FETCH_AHEAD 32
#define FETCHING_ROWS 3

/* The rows of an 8-bit product as its passes read them: per row and block of BLOCK inputs, the inputs as 16-bit
 * integers times a step (two to an int32, inputs 2i and 2i + 1, as the panels pair the weights), and the sum of
 * the inputs themselves. */
typedef struct {
    const int32_t *x;    /* rows x pairs */
    const float *steps;  /* rows x blocks */
    const float *sums;   /* rows x blocks */
    int64_t pairs, blocks;
} q8_rows_t;

/* The pair after the last of block `block`. */
static inline int64_t block_end(const q8_rows_t *in, int64_t block) {
    return (block + 1) * BLOCK_PAIRS < in->pairs ? (block + 1) * BLOCK_PAIRS : in->pairs;
}

/* Pair `pair`'s weight bytes in block `block` of a panel (the block's bytes at `bytes`). */
static inline const uint8_t *pair_at(const uint8_t *bytes, int64_t block, int64_t pair) {
    return bytes + (pair - block * BLOCK_PAIRS) * 2 * PANEL;
}

/* The bytes of pairs `pair` and `pair` + 1 (`pair` even within its block) in block `block` of a 4-bit panel. */
static inline const uint8_t *nibbles_at(const uint8_t *bytes, int64_t block, int64_t pair) {
    return bytes + (pair - block * BLOCK_PAIRS) / 2 * 2 * PANEL;
}

/* Row r's inputs of pair `pair` + 1, or 0 past the block's last pair (the partner of an odd last pair). */
static inline int32_t next_pair(const q8_rows_t *in, int r, int64_t pair, int64_t end) {
    return pair + 1 < end ? in->x[r * in->pairs + pair + 1] : 0;
}

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
static inline __m256 half8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__F16C__) && defined(__FMA__)
#define GROUP 6 /* rows per pass over a panel: GROUP x 2 accumulators of 16 floats stay in AVX-512 registers */

static inline __m512 half16(const uint16_t *h) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)); }

/* part + (w[2i] x[2i] + w[2i+1] x[2i+1]) for each int32 lane i: exact integer arithmetic, one instruction with VNNI. */
static inline __attribute__((always_inline)) __m512i pair_products(__m512i part, __m512i w, __m512i x) {
#ifdef __AVX512VNNI__
    return _mm512_dpwssd_epi32(part, w, x);
#else
    return _mm512_add_epi32(part, _mm512_madd_epi16(w, x));
#endif
}

/* acc[r] += x[r][k] * (low, high): one input of every row against one input's PANEL weights. `x` points at row 0's
 * input k, rows `k_count` apart. */
static inline __attribute__((always_inline)) void add_products(
    __m512 acc[GROUP][2], const float *x, int64_t k_count, __m512 low, __m512 high, int rows) {
    for (int r = 0; r < rows; r++) {
        __m512 xr = _mm512_set1_ps(x[r * k_count]);
        acc[r][0] = _mm512_fmadd_ps(xr, low, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(xr, high, acc[r][1]);
    }
}

static inline __attribute__((always_inline)) void store_rows(__m512 acc[GROUP][2], float *out, int rows) {
    for (int r = 0; r < rows; r++) {
        _mm512_storeu_ps(out + r * PANEL, acc[r][0]);
        _mm512_storeu_ps(out + r * PANEL + 16, acc[r][1]);
    }
}

static inline __attribute__((always_inline)) void panel_pass(
    const float *x, int64_t k_count, const uint16_t *panel, float *out, int rows) {
    __m512 acc[GROUP][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < k_count; k++) {
        const uint16_t *w = panel + k * PANEL;
        _mm_prefetch((const char *)(w + 8 * PANEL), _MM_HINT_T0);
        __m512 low = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w));
        __m512 high = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 16)));
        add_products(acc, x + k, k_count, low, high, rows);
    }
    store_rows(acc, out, rows);
}

/* acc += s * (d * the block's integer sum) + m * (the block's sum of inputs), for each of the panel's outputs. */
static inline __attribute__((always_inline)) __m512 add_block(
    __m512 acc, __m512i part, const uint16_t *s, const uint16_t *m, float step, float sum) {
    __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(part), _mm512_set1_ps(step));
    return _mm512_fmadd_ps(half16(m), _mm512_set1_ps(sum), _mm512_fmadd_ps(half16(s), scaled, acc));
}

static inline __attribute__((always_inline)) void q8_panel_pass(const q8_rows_t *in, const uint8_t *panel,
                                                                float *out, int rows) {
    __m512 acc[GROUP][2];
    __m512i part[GROUP][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t block = 0; block < in->blocks; block++) {
        const uint8_t *bytes = panel + block * BLOCK_BYTES;
        for (int r = 0; r < rows; r++) part[r][0] = part[r][1] = _mm512_setzero_si512();
        for (int64_t pair = block * BLOCK_PAIRS; pair < block_end(in, block); pair++) {
            const uint8_t *w = pair_at(bytes, block, pair);
            if (rows >= FETCHING_ROWS) _mm_prefetch((const char *)(w + FETCH_AHEAD * 2 * PANEL), _MM_HINT_T0);
            __m512i low = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)w));
            __m512i high = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(w + PANEL)));
            for (int r = 0; r < rows; r++) {
                __m512i xr = _mm512_set1_epi32(in->x[r * in->pairs + pair]);
                part[r][0] = pair_products(part[r][0], low, xr);
                part[r][1] = pair_products(part[r][1], high, xr);
            }
        }
        const uint16_t *s = (const uint16_t *)(bytes + BLOCK_WEIGHT_BYTES), *m = s + PANEL;
        for (int r = 0; r < rows; r++) {
            float step = in->steps[r * in->blocks + block], sum = in->sums[r * in->blocks + block];
            acc[r][0] = add_block(acc[r][0], part[r][0], s, m, step, sum);
            acc[r][1] = add_block(acc[r][1], part[r][1], s + 16, m + 16, step, sum);
        }
    }
    store_rows(acc, out, rows);
}

static void q8_pass(const q8_rows_t *in, const uint8_t *panel, float *out, int rows) {
    switch (rows) {
    case 6: q8_panel_pass(in, panel, out, 6); break;
    case 5: q8_panel_pass(in, panel, out, 5); break;
    case 4: q8_panel_pass(in, panel, out, 4); break;
    case 3: q8_panel_pass(in, panel, out, 3); break;
    case 2: q8_panel_pass(in, panel, out, 2); break;
    default: q8_panel_pass(in, panel, out, 1);
    }
}

/* As q8_panel_pass, on 4-bit panels: two pairs of inputs a load, their weights split from the low and high nibbles.
 * Passes of one or two rows sum the second pair into accumulators of their own (integer sums: the same in any order),
 * so a sum's chain of multiply-adds does not hold up a pass that memory would otherwise keep up with. */
static inline __attribute__((always_inline)) void q4_panel_pass(const q8_rows_t *in, const uint8_t *panel,
                                                                float *out, int rows) {
    const __m512i nibble = _mm512_set1_epi16(0x0f);
    __m512 acc[GROUP][2];
    __m512i part[GROUP][4];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t block = 0; block < in->blocks; block++) {
        const uint8_t *bytes = panel + block * NIBBLE_BLOCK_BYTES;
        for (int r = 0; r < rows; r++) part[r][0] = part[r][1] = part[r][2] = part[r][3] = _mm512_setzero_si512();
        int64_t end = block_end(in, block);
        for (int64_t pair = block * BLOCK_PAIRS; pair < end; pair += 2) {
            const uint8_t *w = nibbles_at(bytes, block, pair);
            if (rows >= FETCHING_ROWS) _mm_prefetch((const char *)(w + FETCH_AHEAD * 2 * PANEL), _MM_HINT_T0);
            __m512i low = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)w));
            __m512i high = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(w + PANEL)));
            __m512i low_first = _mm512_and_si512(low, nibble), low_second = _mm512_srli_epi16(low, 4);
            __m512i high_first = _mm512_and_si512(high, nibble), high_second = _mm512_srli_epi16(high, 4);
            for (int r = 0; r < rows; r++) {
                __m512i first = _mm512_set1_epi32(in->x[r * in->pairs + pair]);
                __m512i second = _mm512_set1_epi32(next_pair(in, r, pair, end));
                int apart = rows <= 2 ? 2 : 0;
                part[r][0] = pair_products(part[r][0], low_first, first);
                part[r][1] = pair_products(part[r][1], high_first, first);
                part[r][apart] = pair_products(part[r][apart], low_second, second);
                part[r][apart + 1] = pair_products(part[r][apart + 1], high_second, second);
            }
        }
        const uint16_t *s = (const uint16_t *)(bytes + NIBBLE_WEIGHT_BYTES), *m = s + PANEL;
        for (int r = 0; r < rows; r++) {
            if (rows <= 2) {
                part[r][0] = _mm512_add_epi32(part[r][0], part[r][2]);
                part[r][1] = _mm512_add_epi32(part[r][1], part[r][3]);
            }
            float step = in->steps[r * in->blocks + block], sum = in->sums[r * in->blocks + block];
            acc[r][0] = add_block(acc[r][0], part[r][0], s, m, step, sum);
            acc[r][1] = add_block(acc[r][1], part[r][1], s + 16, m + 16, step, sum);
        }
    }
    store_rows(acc, out, rows);
}

static void q4_pass(const q8_rows_t *in, const uint8_t *panel, float *out, int rows) {
    switch (rows) {
    case 6: q4_panel_pass(in, panel, out, 6); break;
    case 5: q4_panel_pass(in, panel, out, 5); break;
    case 4: q4_panel_pass(in, panel, out, 4); break;
    case 3: q4_panel_pass(in, panel, out, 3); break;
    case 2: q4_panel_pass(in, panel, out, 2); break;
    default: q4_panel_pass(in, panel, out, 1);
    }
}

static void pass(const float *x, int64_t k_count, const uint16_t *panel, float *out, int rows) {
    /* Constant row counts, so each pass keeps its accumulators in registers. */
    switch (rows) {
    case 6: panel_pass(x, k_count, panel, out, 6); break;
    case 5: panel_pass(x, k_count, panel, out, 5); break;
    case 4: panel_pass(x, k_count, panel, out, 4); break;
    case 3: panel_pass(x, k_count, panel, out, 3); break;
    case 2: panel_pass(x, k_count, panel, out, 2); break;
    default: panel_pass(x, k_count, panel, out, 1);
    }
}

#ifdef __AVX512VNNI__
const char *reef_decode_kernel_kind(void) { return "avx512-vnni-f16c-fma"; }
#else
const char *reef_decode_kernel_kind(void) { return "avx512-f16c-fma"; }
#endif

#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define GROUP 3 /* rows per pass over a panel: GROUP x PANEL / 8 accumulators stay in AVX2 registers */

static inline __attribute__((always_inline)) void panel_pass(
    const float *x, int64_t k_count, const uint16_t *panel, float *out, int rows) {
    __m256 acc[GROUP][4];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t k = 0; k < k_count; k++) {
        const uint16_t *w = panel + k * PANEL;
        _mm_prefetch((const char *)(w + 8 * PANEL), _MM_HINT_T0);
        __m256 xr[GROUP];
        for (int r = 0; r < rows; r++) xr[r] = _mm256_broadcast_ss(x + r * k_count + k);
        for (int c = 0; c < 4; c++) {
            __m256 wc = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + c * 8)));
            for (int r = 0; r < rows; r++) acc[r][c] = _mm256_fmadd_ps(xr[r], wc, acc[r][c]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < 4; c++) _mm256_storeu_ps(out + r * PANEL + c * 8, acc[r][c]);
}

/* acc[r] += s * (d * the block's integer sums) + m * (the block's sum of inputs), for 16 outputs of each row. */
static inline __attribute__((always_inline)) void add_half_block(__m256 acc[GROUP][2], __m256i part[GROUP][2],
                                                                 const q8_rows_t *in, int64_t block,
                                                                 const uint16_t *s, const uint16_t *m, int rows) {
    __m256 s_low = half8(s), s_high = half8(s + 8), m_low = half8(m), m_high = half8(m + 8);
    for (int r = 0; r < rows; r++) {
        __m256 step = _mm256_set1_ps(in->steps[r * in->blocks + block]);
        __m256 sum = _mm256_set1_ps(in->sums[r * in->blocks + block]);
        __m256 low_part = _mm256_mul_ps(_mm256_cvtepi32_ps(part[r][0]), step);
        __m256 high_part = _mm256_mul_ps(_mm256_cvtepi32_ps(part[r][1]), step);
        acc[r][0] = _mm256_fmadd_ps(m_low, sum, _mm256_fmadd_ps(s_low, low_part, acc[r][0]));
        acc[r][1] = _mm256_fmadd_ps(m_high, sum, _mm256_fmadd_ps(s_high, high_part, acc[r][1]));
    }
}

/* Each row's outputs [half * 16, half * 16 + 16) of the panel, from its two accumulators. */
static inline __attribute__((always_inline)) void store_half_rows(__m256 acc[GROUP][2], float *out, int rows,
                                                                  int half) {
    for (int r = 0; r < rows; r++) {
        _mm256_storeu_ps(out + r * PANEL + half * 16, acc[r][0]);
        _mm256_storeu_ps(out + r * PANEL + half * 16 + 8, acc[r][1]);
    }
}

/* Outputs [half * 16, half * 16 + 16) of the panel: the accumulators of a whole panel would not fit in AVX2's
 * registers. */
static inline __attribute__((always_inline)) void q8_half_pass(const q8_rows_t *in, const uint8_t *panel,
                                                               float *out, int rows, int half) {
    __m256 acc[GROUP][2];
    __m256i part[GROUP][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t block = 0; block < in->blocks; block++) {
        const uint8_t *bytes = panel + block * BLOCK_BYTES;
        for (int r = 0; r < rows; r++) part[r][0] = part[r][1] = _mm256_setzero_si256();
        for (int64_t pair = block * BLOCK_PAIRS; pair < block_end(in, block); pair++) {
            const uint8_t *w = pair_at(bytes, block, pair) + half * PANEL;
            if (rows >= FETCHING_ROWS) _mm_prefetch((const char *)(w + FETCH_AHEAD * 2 * PANEL), _MM_HINT_T0);
            __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)w));
            __m256i high = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + 16)));
            for (int r = 0; r < rows; r++) {
                __m256i xr = _mm256_set1_epi32(in->x[r * in->pairs + pair]);
                part[r][0] = _mm256_add_epi32(part[r][0], _mm256_madd_epi16(low, xr));
                part[r][1] = _mm256_add_epi32(part[r][1], _mm256_madd_epi16(high, xr));
            }
        }
        const uint16_t *s = (const uint16_t *)(bytes + BLOCK_WEIGHT_BYTES) + half * 16, *m = s + PANEL;
        add_half_block(acc, part, in, block, s, m, rows);
    }
    store_half_rows(acc, out, rows, half);
}

static void q8_pass(const q8_rows_t *in, const uint8_t *panel, float *out, int rows) {
    for (int half = 0; half < 2; half++) {
        if (rows == 3)
            q8_half_pass(in, panel, out, 3, half);
        else if (rows == 2)
            q8_half_pass(in, panel, out, 2, half);
        else
            q8_half_pass(in, panel, out, 1, half);
    }
}

/* As q8_half_pass, on 4-bit panels (see q4_panel_pass). */
static inline __attribute__((always_inline)) void q4_half_pass(const q8_rows_t *in, const uint8_t *panel,
                                                               float *out, int rows, int half) {
    const __m256i nibble = _mm256_set1_epi16(0x0f);
    __m256 acc[GROUP][2];
    __m256i part[GROUP][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t block = 0; block < in->blocks; block++) {
        const uint8_t *bytes = panel + block * NIBBLE_BLOCK_BYTES;
        for (int r = 0; r < rows; r++) part[r][0] = part[r][1] = _mm256_setzero_si256();
        int64_t end = block_end(in, block);
        for (int64_t pair = block * BLOCK_PAIRS; pair < end; pair += 2) {
            const uint8_t *w = nibbles_at(bytes, block, pair) + half * PANEL;
            if (rows >= FETCHING_ROWS) _mm_prefetch((const char *)(w + FETCH_AHEAD * 2 * PANEL), _MM_HINT_T0);
            __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)w));
            __m256i high = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + 16)));
            __m256i low_first = _mm256_and_si256(low, nibble), low_second = _mm256_srli_epi16(low, 4);
            __m256i high_first = _mm256_and_si256(high, nibble), high_second = _mm256_srli_epi16(high, 4);
            for (int r = 0; r < rows; r++) {
                __m256i first = _mm256_set1_epi32(in->x[r * in->pairs + pair]);
                __m256i second = _mm256_set1_epi32(next_pair(in, r, pair, end));
                __m256i low_sum = _mm256_add_epi32(_mm256_madd_epi16(low_first, first),
                                                   _mm256_madd_epi16(low_second, second));
                __m256i high_sum = _mm256_add_epi32(_mm256_madd_epi16(high_first, first),
                                                    _mm256_madd_epi16(high_second, second));
                part[r][0] = _mm256_add_epi32(part[r][0], low_sum);
                part[r][1] = _mm256_add_epi32(part[r][1], high_sum);
            }
        }
        const uint16_t *s = (const uint16_t *)(bytes + NIBBLE_WEIGHT_BYTES) + half * 16, *m = s + PANEL;
        add_half_block(acc, part, in, block, s, m, rows);
    }
    store_half_rows(acc, out, rows, half);
}

static void q4_pass(const q8_rows_t *in, const uint8_t *panel, float *out, int rows) {
    for (int half = 0; half < 2; half++) {
        if (rows == 3)
            q4_half_pass(in, panel, out, 3, half);
        else if (rows == 2)
            q4_half_pass(in, panel, out, 2, half);
        else
            q4_half_pass(in, panel, out, 1, half);
    }
}

static void pass(const float *x, int64_t k_count, const uint16_t *panel, float *out, int rows) {
    /* Constant row counts, so each pass keeps its accumulators in registers. */
    if (rows == 3)
        panel_pass(x, k_count, panel, out, 3);
    else if (rows == 2)
        panel_pass(x, k_count, panel, out, 2);
    else
        panel_pass(x, k_count, panel, out, 1);
}

const char *reef_decode_kernel_kind(void) { return "avx2-f16c-fma"; }

#else
#define GROUP 3

static void pass(const float *x, int64_t k_count, const uint16_t *panel, float *out, int rows) {
    float acc[GROUP][PANEL] = {{0}};
    for (int64_t k = 0; k < k_count; k++) {
        float w[PANEL];
        for (int j = 0; j < PANEL; j++) w[j] = half_to_float(panel[k * PANEL + j]);
        for (int r = 0; r < rows; r++) {
            float xr = x[r * k_count + k];
            for (int j = 0; j < PANEL; j++) {
                float product = xr * w[j]; /* compiled with -ffp-contract=off: never fused */
                acc[r][j] = acc[r][j] + product;
            }
        }
    }
    for (int r = 0; r < rows; r++) memcpy(out + r * PANEL, acc[r], sizeof acc[r]);
}

/* acc[r][j] += s[j] * (d * part[r][j]) + m[j] * (the block's sum of inputs); the block's scales at s, minimums
 * after them. */
static void add_block_sums(float acc[GROUP][PANEL], int32_t part[GROUP][PANEL], const q8_rows_t *in, int64_t block,
                           const uint16_t *s, int rows) {
    const uint16_t *m = s + PANEL;
    for (int r = 0; r < rows; r++) {
        float step = in->steps[r * in->blocks + block], sum = in->sums[r * in->blocks + block];
        for (int j = 0; j < PANEL; j++) {
            float scaled = (float)part[r][j] * step;
            acc[r][j] = fmaf(half_to_float(m[j]), sum, fmaf(half_to_float(s[j]), scaled, acc[r][j]));
        }
    }
}

static void q8_pass(const q8_rows_t *in, const uint8_t *panel, float *out, int rows) {
    float acc[GROUP][PANEL] = {{0}};
    for (int64_t block = 0; block < in->blocks; block++) {
        const uint8_t *bytes = panel + block * BLOCK_BYTES;
        int32_t part[GROUP][PANEL] = {{0}};
        for (int64_t pair = block * BLOCK_PAIRS; pair < block_end(in, block); pair++) {
            const uint8_t *w = pair_at(bytes, block, pair);
            for (int r = 0; r < rows; r++) {
                uint32_t both = (uint32_t)in->x[r * in->pairs + pair];
                int32_t first = (int16_t)(both & 0xffff), second = (int16_t)(both >> 16);
                for (int j = 0; j < PANEL; j++) part[r][j] += w[2 * j] * first + w[2 * j + 1] * second;
            }
        }
        add_block_sums(acc, part, in, block, (const uint16_t *)(bytes + BLOCK_WEIGHT_BYTES), rows);
    }
    for (int r = 0; r < rows; r++) memcpy(out + r * PANEL, acc[r], sizeof acc[r]);
}

static void q4_pass(const q8_rows_t *in, const uint8_t *panel, float *out, int rows) {
    float acc[GROUP][PANEL] = {{0}};
    for (int64_t block = 0; block < in->blocks; block++) {
        const uint8_t *bytes = panel + block * NIBBLE_BLOCK_BYTES;
        int32_t part[GROUP][PANEL] = {{0}};
        int64_t end = block_end(in, block);
        for (int64_t pair = block * BLOCK_PAIRS; pair < end; pair += 2) {
            const uint8_t *w = nibbles_at(bytes, block, pair);
            for (int r = 0; r < rows; r++) {
                uint32_t both = (uint32_t)in->x[r * in->pairs + pair], next = (uint32_t)next_pair(in, r, pair, end);
                int32_t x[4] = {(int16_t)(both & 0xffff), (int16_t)(both >> 16), (int16_t)(next & 0xffff),
                                (int16_t)(next >> 16)};
                for (int j = 0; j < PANEL; j++)
                    part[r][j] += (w[2 * j] & 15) * x[0] + (w[2 * j + 1] & 15) * x[1] + (w[2 * j] >> 4) * x[2] +
                                  (w[2 * j + 1] >> 4) * x[3];
            }
        }
        add_block_sums(acc, part, in, block, (const uint16_t *)(bytes + NIBBLE_WEIGHT_BYTES), rows);
    }
    for (int r = 0; r < rows; r++) memcpy(out + r * PANEL, acc[r], sizeof acc[r]);
}

const char *reef_decode_kernel_kind(void) { return "portable"; }

#endif

/* One weight of a product and where its outputs go: its panels (decode_format.h) and their format. */
typedef struct {
    const void *packed;
    int format; /* FORMAT_HALF, FORMAT_BYTE or FORMAT_NIBBLE */
    int64_t n_count;
    float *y; /* rows x n_count */
} weight_t;

#define MAX_WEIGHTS 3 /* weights one product reads with the same input: a layer's query, key and value */

/* The products of the same rows with up to MAX_WEIGHTS weights, computed as one job: its panels are shared out among
 * the threads as one list, so the weights read together (a layer's q, k and v; its gate and up) cost one hand-out. */
typedef struct {
    const float *x;
    int64_t rows, k_count;
    q8_rows_t q8; /* 8-bit and 4-bit: the rows as the passes read them */
    int count;
    weight_t weights[MAX_WEIGHTS];
} product_t;

static int64_t panel_count(const weight_t *w) { return (w->n_count + PANEL - 1) / PANEL; }

/* Panels [first_panel, end_panel) of one weight. */
static void panels(const product_t *p, const weight_t *w, int64_t first_panel, int64_t end_panel) {
    float out[GROUP * PANEL];
    const q8_rows_t *all = &p->q8;
    for (int64_t index = first_panel; index < end_panel; index++) {
        int64_t first = index * PANEL;
        int64_t width = w->n_count - first < PANEL ? w->n_count - first : PANEL;
        for (int64_t row = 0; row < p->rows; row += GROUP) {
            int group = p->rows - row < GROUP ? (int)(p->rows - row) : GROUP;
            if (w->format == FORMAT_HALF) {
                pass(p->x + row * p->k_count, p->k_count, (const uint16_t *)w->packed + first * p->k_count, out,
                     group);
            } else {
                q8_rows_t rows = {all->x + row * all->pairs, all->steps + row * all->blocks,
                                  all->sums + row * all->blocks, all->pairs, all->blocks};
                if (w->format == FORMAT_BYTE)
                    q8_pass(&rows, (const uint8_t *)w->packed + index * all->blocks * BLOCK_BYTES, out, group);
                else
                    q4_pass(&rows, (const uint8_t *)w->packed + index * all->blocks * NIBBLE_BLOCK_BYTES, out, group);
            }
            for (int r = 0; r < group; r++)
                memcpy(w->y + (row + r) * w->n_count + first, out + r * PANEL, (size_t)width * sizeof(float));
        }
    }
}

/* Helper threads. A job (a product's panels, attention's rows and heads) is a run of units shared out among the
 * threads taking part, each starting with an equal share of them in grains. A thread claims half of what is left of
 * its own share from the front (at least a grain), on a cache line no other thread touches meanwhile; one with none
 * left takes half of what is left of another's share from its back, and goes on with that as its own. So a thread
 * that the system runs less (another process, or the event loop, on its core), or that memory serves less, computes
 * less, and the others finish its share instead of waiting for it. Each output is computed as above whichever thread
 * does it, so the result does not depend on the number of threads, nor on who claimed what. Between jobs a helper
 * spins briefly (the next one of a layer usually follows within microseconds), then sleeps. */
#define MAX_THREADS 64
#define SPIN_NS 50000

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER;
static int helpers;                 /* started helper threads; helper i takes part in jobs of more than i threads */
typedef struct {
    void (*run)(const void *task, int64_t first, int64_t end); /* computes units [first, end) */
    const void *task;
    int64_t units, grain; /* how many units, and how many units make a grain (the last grain may have fewer) */
} job_t;

/* Grains of a thread's share: about this many, so that the threads end within a grain or two of each other. A claim
 * is an atomic operation on a line in the thread's own cache, but one that waits for the thread's reads in flight:
 * claims of half of what is left make about log2(GRAINS_PER_THREAD) of them a job. Against halves of one counter
 * shared by all threads, a step took 0.94x-1.00x the time for one row and 0.94x-0.96x for four with halving claims,
 * and 1.00x and 0.99x with claims of one grain. With that one counter the calling thread waited for a helper 0.2-0.4
 * ms a step of one row; claimed from in quarters, it cost more than that, each claim moving its line between cores. */
#define GRAINS_PER_THREAD 32
#define MAX_GRAINS 0xffff /* a share's grains are numbered in 16 bits */

/* A thread's share of the current job: the job's generation (high 32 bits), its first unclaimed grain (16 bits) and
 * its end (low 16 bits), so that a helper that comes late to a job that is over claims nothing of the next one; and
 * the units this thread computed of the job, whoever's share they came from. */
typedef struct {
    _Alignas(64) _Atomic uint64_t grains;
    _Atomic int64_t computed;
} share_t;

static job_t current;                /* the job being computed */
static int sharing;                  /* how many threads take part in it, this one included */
static _Atomic int64_t generation;   /* counts jobs; a helper works when it sees a new one */
static share_t shares[MAX_THREADS];  /* thread i's share (this one's: 0) */

static inline uint64_t share_of(int64_t seen, int64_t first, int64_t end) {
    return (uint64_t)seen << 32 | (uint64_t)first << 16 | (uint64_t)end;
}

/* Half of what is left of another thread's share (at least one grain), taken from its back into share `self`
 * (empty now); 0 when the job is over or no share has a grain left. */
static int take_from_another(int self, int count, int64_t seen) {
    uint64_t mark = (uint64_t)seen << 32;
    for (int i = 1; i < count; i++) {
        share_t *other = &shares[(self + i) % count];
        uint64_t grains = atomic_load_explicit(&other->grains, memory_order_acquire);
        for (;;) {
            if ((grains & ~(uint64_t)0xffffffffu) != mark) return 0;
            int64_t first = (int64_t)(grains >> 16 & 0xffff), end = (int64_t)(grains & 0xffff);
            if (first >= end) break;
            int64_t from = end - (end - first + 1) / 2;
            if (atomic_compare_exchange_weak_explicit(&other->grains, &grains, share_of(seen, first, from),
                                                      memory_order_acq_rel, memory_order_acquire)) {
                atomic_store_explicit(&shares[self].grains, share_of(seen, from, end), memory_order_release);
                return 1;
            }
        }
    }
    return 0;
}

/* Computes grains of `job` (of generation `seen`) as thread `self` of `count`, its own and then others', until none
 * is left. */
static void take_part(job_t job, int64_t seen, int self, int count) {
    share_t *own = &shares[self];
    uint64_t mark = (uint64_t)seen << 32;
    int64_t computed = 0;
    for (;;) {
        uint64_t grains = atomic_load_explicit(&own->grains, memory_order_acquire);
        int64_t taken = 0, from = 0;
        while ((grains & ~(uint64_t)0xffffffffu) == mark && (grains >> 16 & 0xffff) < (grains & 0xffff)) {
            from = (int64_t)(grains >> 16 & 0xffff);
            int64_t left = (int64_t)(grains & 0xffff) - from;
            taken = left > 1 ? left / 2 : 1;
            if (atomic_compare_exchange_weak_explicit(&own->grains, &grains, grains + ((uint64_t)taken << 16),
                                                      memory_order_acq_rel, memory_order_acquire))
                break;
            taken = 0;
        }
        if (taken == 0) {
            if (take_from_another(self, count, seen)) continue;
            return;
        }
        int64_t first = from * job.grain, end = (from + taken) * job.grain;
        if (end > job.units) end = job.units;
        job.run(job.task, first, end);
        computed += end - first;
        atomic_store_explicit(&own->computed, computed, memory_order_release);
    }
}

/* Panels [first, end) of the product (`task`), the weights' panels taken as one list: a job's units. */
static void product_panels(const void *task, int64_t first, int64_t end) {
    const product_t *p = task;
    int64_t start = 0;
    for (int i = 0; i < p->count && start < end; i++) {
        const weight_t *w = &p->weights[i];
        int64_t own_first = first > start ? first - start : 0, own_end = end - start;
        if (own_end > panel_count(w)) own_end = panel_count(w);
        if (own_first < own_end) panels(p, w, own_first, own_end);
        start += panel_count(w);
    }
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

typedef struct {
    int index;
    int64_t seen; /* the last product before this helper started: it takes part from the next one on */
} helper_start_t;

static void *helper(void *argument) {
    helper_start_t start = *(helper_start_t *)argument;
    free(argument);
    int index = start.index;
    int64_t seen = start.seen;
    for (;;) {
        int64_t began = now_ns();
        while (atomic_load_explicit(&generation, memory_order_acquire) == seen && now_ns() - began < SPIN_NS) {
        }
        pthread_mutex_lock(&pool_lock);
        while (atomic_load(&generation) == seen) pthread_cond_wait(&pool_wake, &pool_lock);
        seen = atomic_load(&generation); /* the job and who takes part as of this generation, taken together */
        job_t job = current;
        int count = sharing;
        pthread_mutex_unlock(&pool_lock);
        if (index < count) take_part(job, seen, index, count);
    }
    return NULL;
}

static void forget_helpers(void) { helpers = 0; } /* a forked child has none of its parent's threads */

static int start_helpers(int wanted) {
    static int registered;
    if (!registered) {
        pthread_atfork(NULL, NULL, forget_helpers);
        registered = 1;
    }
    while (helpers < wanted) {
        pthread_t thread;
        helper_start_t *start = malloc(sizeof *start);
        if (start == NULL) break;
        *start = (helper_start_t){helpers + 1, atomic_load(&generation)};
        if (pthread_create(&thread, NULL, helper, start) != 0) {
            free(start);
            break;
        }
        pthread_detach(thread);
        helpers++;
    }
    return helpers;
}

static pthread_mutex_t pool_user = PTHREAD_MUTEX_INITIALIZER; /* held by the one job using the helpers */

/* Runs `job` on up to `threads` threads (this one and helpers). Calls may overlap (two models in one process): one of
 * them uses the helpers, the others compute on their own thread. */
static void run_shared(job_t job, int threads) {
    int count = threads < MAX_THREADS ? threads : MAX_THREADS;
    if (count > job.units) count = (int)job.units;
    if (count > 1 && pthread_mutex_trylock(&pool_user) != 0) count = 1;
    if (count > 1) {
        count = 1 + (start_helpers(count - 1) < count - 1 ? helpers : count - 1);
        if (count <= 1) pthread_mutex_unlock(&pool_user);
    }
    if (count <= 1) {
        job.run(job.task, 0, job.units);
        return;
    }
    job.grain = job.units / (count * GRAINS_PER_THREAD);
    if (job.grain < 1) job.grain = 1;
    if (job.grain < (job.units + MAX_GRAINS - 1) / MAX_GRAINS) job.grain = (job.units + MAX_GRAINS - 1) / MAX_GRAINS;
    int64_t grains = (job.units + job.grain - 1) / job.grain;
    pthread_mutex_lock(&pool_lock);
    current = job;
    sharing = count;
    int64_t seen = (atomic_load(&generation) + 1) & 0xffffffff;
    for (int i = 0; i < count; i++) {
        atomic_store_explicit(&shares[i].computed, 0, memory_order_relaxed);
        atomic_store_explicit(&shares[i].grains, share_of(seen, grains * i / count, grains * (i + 1) / count),
                              memory_order_relaxed);
    }
    atomic_store_explicit(&generation, seen, memory_order_release);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_lock);
    take_part(job, seen, 0, count);
    for (int64_t computed = 0; computed < job.units;) {
        computed = 0;
        for (int i = 0; i < count; i++) computed += atomic_load_explicit(&shares[i].computed, memory_order_acquire);
    }
    pthread_mutex_unlock(&pool_user);
}

/* Row r's inputs in block b as 16-bit integers v times one step d (v = x / d rounded, |v| <= INPUT_LEVELS), two to an
 * int32 (inputs 2i and 2i + 1, an odd last input's partner 0), and the sum of those inputs (SUM_LANES running sums,
 * input k of the block into sum k % SUM_LANES in order, then added pairwise: the same order in every build, eight
 * inputs an instruction where AVX2 is). An input that is not finite gives its block the step NaN, so its outputs are
 * NaN as fp32 arithmetic would make them. */
#define INPUT_LEVELS 32767.0f
#define SUM_LANES 8

/* SUM_LANES running sums added pairwise, in the same order in every build. */
static inline float lane_total(const float lanes[SUM_LANES]) {
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/* The block's sum (as above) and its largest |x| (or a NaN): `count` inputs at x. */
static void block_range(const float *x, int64_t count, float *sum, float *largest) {
    float lanes[SUM_LANES] = {0.0f}, top = 0.0f;
    int64_t k = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    __m256 sums = _mm256_setzero_ps(), tops = _mm256_setzero_ps();
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (; k + SUM_LANES <= count; k += SUM_LANES) {
        __m256 v = _mm256_loadu_ps(x + k);
        sums = _mm256_add_ps(sums, v);
        tops = _mm256_max_ps(tops, _mm256_and_ps(v, magnitude)); /* a NaN input keeps the NaN (second operand) */
    }
    _mm256_storeu_ps(lanes, sums);
    float tops_out[SUM_LANES];
    _mm256_storeu_ps(tops_out, tops);
    for (int lane = 0; lane < SUM_LANES; lane++)
        top = tops_out[lane] > top || isnan(tops_out[lane]) ? tops_out[lane] : top;
#endif
    for (; k < count; k++) {
        lanes[k % SUM_LANES] += x[k];
        float size = fabsf(x[k]);
        top = size > top || isnan(size) ? size : top;
    }
    *sum = lane_total(lanes);
    *largest = top;
}

/* The 16-bit level of x at `inverse` levels a unit. */
static inline int32_t level_of(float x, float inverse) {
    float v = rintf(x * inverse);
    v = v > INPUT_LEVELS ? INPUT_LEVELS : (v < -INPUT_LEVELS ? -INPUT_LEVELS : v);
    return v == v ? (int32_t)v : 0; /* NaN: its block's step is NaN anyway */
}

/* out[i] = the levels of inputs 2i and 2i + 1 of the `count` at x, two 16-bit integers to an int32. */
static void pack_levels(const float *x, int64_t count, float inverse, int32_t *out) {
    int64_t k = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    const __m256 scale = _mm256_set1_ps(inverse), high = _mm256_set1_ps(INPUT_LEVELS);
    const __m256i low_half = _mm256_set1_epi32(0xffff), evens = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (; k + 8 <= count; k += 8) {
        __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), scale),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), high)), high);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); /* NaN to 0 */
        __m256i levels = _mm256_and_si256(_mm256_cvtps_epi32(v), low_half);
        __m256i pairs = _mm256_or_si256(levels, _mm256_srli_epi64(levels, 16)); /* each 64 bits: 2i | 2i+1 << 16 */
        _mm_storeu_si128((__m128i *)(out + k / 2),
                         _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(pairs, evens)));
    }
#endif
    for (; k < count; k += 2) {
        uint32_t low = (uint16_t)level_of(x[k], inverse);
        uint32_t high = k + 1 < count ? (uint16_t)level_of(x[k + 1], inverse) : 0;
        out[k / 2] = (int32_t)(low | high << 16);
    }
}

static void quantise_rows(const float *x, int64_t rows, int64_t k_count, int32_t *pairs_out, float *steps,
                          float *sums) {
    int64_t blocks = (k_count + BLOCK - 1) / BLOCK, pairs = (k_count + 1) / 2;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * k_count;
        for (int64_t b = 0; b < blocks; b++) {
            int64_t first = b * BLOCK, count = first + BLOCK < k_count ? BLOCK : k_count - first;
            float sum, largest;
            block_range(row + first, count, &sum, &largest);
            int finite = isfinite(sum) && isfinite(largest);
            float inverse = finite && largest > 0.0f ? INPUT_LEVELS / largest : 0.0f;
            steps[r * blocks + b] = finite ? largest / INPUT_LEVELS : NAN;
            sums[r * blocks + b] = sum;
            pack_levels(row + first, count, inverse, pairs_out + r * pairs + first / 2);
        }
    }
}

/* y = x W^T for each of `count` weights (`weights`, any mix of the formats) with the same rows x: one job,
 * the inputs taken to integers once when a weight is 8-bit or 4-bit. Returns 0, or -1 when memory ran out. */
static int multiply(const float *x, int64_t rows, int64_t k_count, const weight_t *weights, int count, int threads) {
    product_t product = {x, rows, k_count, {0}, count, {{0}}};
    int64_t total = 0, blocks = (k_count + BLOCK - 1) / BLOCK, pairs = (k_count + 1) / 2;
    int integers = 0;
    for (int i = 0; i < count; i++) {
        product.weights[i] = weights[i];
        total += panel_count(&weights[i]);
        integers |= weights[i].format != FORMAT_HALF;
    }
    float *per_block = NULL;
    int32_t *levels = NULL;
    if (integers) {
        per_block = malloc((size_t)(2 * rows * blocks) * sizeof(float));
        levels = malloc((size_t)(rows * pairs) * sizeof(int32_t));
        if (per_block == NULL || levels == NULL) {
            free(per_block);
            free(levels);
            return -1;
        }
        quantise_rows(x, rows, k_count, levels, per_block, per_block + rows * blocks);
        product.q8 = (q8_rows_t){levels, per_block, per_block + rows * blocks, pairs, blocks};
    }
    run_shared((job_t){product_panels, &product, total, 0}, threads);
    free(per_block);
    free(levels);
    return 0;
}

/* x: rows x k_count fp32; packed: ceil(n_count / PANEL) panels in `format` (decode_format.h); y: rows x n_count
 * fp32. Computed on up to `threads` threads. Returns 0, or -1 when memory ran out.
 *
 * fp16 panels: as the top of this file says.
 *
 * 8-bit panels: one byte q per weight, an output's weights of inputs 2i and 2i + 1 side by side, and each block of
 * BLOCK inputs of an output with a scale s and a minimum m (fp16, after the block's bytes), the weight W[n][k]
 * standing for q * s + m. 4-bit panels hold the same q two a byte, and give the same bits.
 * Asymmetric, as llama.cpp's Q8_1. Each row's inputs in a block are taken as 16-bit integers v times a step d (d = the
 * block's largest |x| / 32767), within d / 2 of each input: 2^-16 of the block's largest. A block's part of an output
 * is s * (d * the integer sum over its inputs of q * v) + m * (the sum of its inputs x, as quantise_rows sums them,
 * once per row and block for every output), added to the output's sum block by block, each step one fused multiply-add.
 * The integer sums are exact in any order, so every path (AVX-512 with or without VNNI, AVX2, the portable C) gives the
 * same bits, and a row the same bits alone or in any batch. Returns 0, or -1 when memory ran out. */
int reef_linear(const float *x, int64_t rows, int64_t k_count, const void *packed, int format, int64_t n_count,
                float *y, int threads) {
    weight_t weight = {packed, format, n_count, y};
    return multiply(x, rows, k_count, &weight, 1, threads);
}

/* Decoding attention: one new position per row, each row attending over exactly its own positions.
 *
 * keys, values: the cache, [rows, kv_heads, capacity, dim], keys fp32 and values fp16 (the bits). Row r's new key
 * and value ([rows, kv_heads, dim], fp32; the value rounded to fp16 as it is written) are written at position
 * positions[r], then its query ([rows, heads, dim]) attends over positions 0 .. positions[r];
 * query head h reads key/value head h / (heads / kv_heads) (grouped-query attention) without copying it. Scores are
 * scaled dot products, softmax-ed in fp32 against their maximum (the exponential as Cephes' expf computes it, eight
 * at a time where AVX2 is); a row longer than ATTENTION_PART is attended in parts, joined after. Each (row, head) is
 * computed in a fixed order that depends on its own positions only, on whichever thread (the (row, key/value head,
 * part) units are shared out among up to `threads` when there is enough to do), so a row's output does not depend on
 * the rows beside it. Returns 0, or -1 when memory ran out (the new keys and values are written; what was attended
 * is not to be used). */
static float dot(const float *a, const float *b, int64_t n) {
    int64_t i = 0;
    float total = 0.0f;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int lane = 0; lane < 8; lane++) total += lanes[lane];
#endif
    for (; i < n; i++) total += a[i] * b[i];
    return total;
}

/* Positions of a row attended as one part: a longer row is split into parts of this many (the last shorter), each
 * part's softmax taken against its own largest score and the parts joined after (see join_parts), so the threads
 * share a long row. A row of one part is attended whole. */
#define ATTENTION_PART 512

typedef struct {
    const float *query, *keys;
    const uint16_t *values; /* fp16 */
    const int64_t *positions;
    int64_t rows, heads, kv_heads, capacity, dim;
    int64_t widest;       /* the most positions one unit scores: the longest row, at most ATTENTION_PART */
    const int64_t *first; /* per row, its first unit (rows + 1 of them): kv_heads units per part */
    const int64_t *parts_before; /* per row, the parts of the rows before it */
    float scale;
    float *out;
    float *partials; /* per part and query head of a row of several parts: its output, largest score and total */
    _Atomic int failed;
} attention_t;

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
/* Lane j of the result: the sum of v[j]'s eight lanes. */
static inline __m256 lane_sums(const __m256 v[8]) {
    __m256 first = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 second = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(first, second, 0x20), _mm256_permute2f128_ps(first, second, 0x31));
}

/* exp(x) for x <= 0 (attention's scores less their largest), as Cephes' expf computes it: x = n ln 2 + r, and e^r
 * from a polynomial, within a few units in the last place of fp32; below -87 (where e^x is under 2^-125) as e^-87,
 * and NaN as NaN. */
static inline __m256 exp_of_negative(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x); /* a NaN x is kept: max returns its second operand then */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i power = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(power));
}
#endif

/* exp_of_negative for one x, with the same operations in the same order: the same bits in every build. */
static inline float exp_of_negative_one(float x) {
    if (isnan(x)) return x;
    x = x > -87.0f ? x : -87.0f;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r + 1.0f);
    union {
        int32_t bits;
        float value;
    } power = {((int32_t)n + 127) << 23};
    return p * power.value;
}

/* The sum of e^(x[t] - top) over the `count` values at x, eight at a time where AVX2 is; out[t] = each of them where
 * `out` is not NULL (it may be x). */
static float exponentials(const float *x, int64_t count, float top, float *out) {
    int64_t t = 0;
    float total = 0.0f;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    __m256 sum = _mm256_setzero_ps(), largest = _mm256_set1_ps(top);
    for (; t + 8 <= count; t += 8) {
        __m256 e = exp_of_negative(_mm256_sub_ps(_mm256_loadu_ps(x + t), largest));
        if (out != NULL) _mm256_storeu_ps(out + t, e);
        sum = _mm256_add_ps(sum, e);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    for (int lane = 0; lane < 8; lane++) total += lanes[lane];
#endif
    for (; t < count; t++) {
        float e = exp_of_negative_one(x[t] - top);
        if (out != NULL) out[t] = e;
        total += e;
    }
    return total;
}

#define QUERY_REGISTERS 16 /* a query of up to this many eight-float parts is held in registers */

/* scores[t] = scale * (q . k[t]) for the keys t in [first, end) of `dim` floats at k (`first` a multiple of eight).
 * Eight keys at a time where `dim` is a whole number of eight-float parts: each key's products summed in a register's
 * lanes, then the eight keys' lanes summed together; a key past the last eight alone. A key's score is the same
 * whatever range it is computed in. */
static void score_keys(const float *q, const float *k, int64_t first, int64_t end, int64_t dim, float scale,
                       float *scores) {
    int64_t t = first;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    int64_t parts = dim / 8;
    if (dim % 8 == 0 && parts <= QUERY_REGISTERS) {
        __m256 query[QUERY_REGISTERS];
        for (int64_t i = 0; i < parts; i++) query[i] = _mm256_loadu_ps(q + 8 * i);
        for (; t + 8 <= end; t += 8) {
            __m256 sums[8];
            for (int j = 0; j < 8; j++) {
                const float *key = k + (t + j) * dim;
                __m256 acc = _mm256_mul_ps(query[0], _mm256_loadu_ps(key));
                for (int64_t i = 1; i < parts; i++) acc = _mm256_fmadd_ps(query[i], _mm256_loadu_ps(key + 8 * i), acc);
                sums[j] = acc;
            }
            _mm256_storeu_ps(scores + t, _mm256_mul_ps(lane_sums(sums), _mm256_set1_ps(scale)));
        }
    }
#endif
    for (; t < end; t++) scores[t] = dot(q, k + t * dim, dim) * scale;
}

static float largest(const float *scores, int64_t span) {
    float top = -INFINITY;
    for (int64_t t = 0; t < span; t++) top = scores[t] > top ? scores[t] : top;
    return top;
}

/* o += the sum over t in [first, end), in order, of weights[t] * v[t] for the fp16 values of `dim` at v (o = that
 * sum when `first` is 0), each value taken to fp32: each output summed in a register across the positions, 64 floats
 * at a time. An output's sum over all positions has the same bits however the positions are split into ranges, taken
 * in order. */
static void add_values(const float *weights, const uint16_t *v, int64_t first, int64_t end, int64_t dim, float *o) {
    int64_t c = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    for (; c + 64 <= dim; c += 64) {
        __m256 acc[8];
        for (int i = 0; i < 8; i++) acc[i] = first == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(o + c + 8 * i);
        for (int64_t t = first; t < end; t++) {
            __m256 w = _mm256_set1_ps(weights[t]);
            const uint16_t *row = v + t * dim + c;
            for (int i = 0; i < 8; i++) acc[i] = _mm256_fmadd_ps(w, half8(row + 8 * i), acc[i]);
        }
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(o + c + 8 * i, acc[i]);
    }
    for (; c + 8 <= dim; c += 8) {
        __m256 acc = first == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(o + c);
        for (int64_t t = first; t < end; t++)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(weights[t]), half8(v + t * dim + c), acc);
        _mm256_storeu_ps(o + c, acc);
    }
#endif
    for (; c < dim; c++) {
        float total = first == 0 ? 0.0f : o[c];
        for (int64_t t = first; t < end; t++) total += weights[t] * half_to_float(v[t * dim + c]);
        o[c] = total;
    }
}

/* count fp32 values as fp16 bits, each rounded to the nearest (ties to even), eight at a time where F16C is. */
static void store_halves(const float *x, int64_t count, uint16_t *out) {
    int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < count; i++) out[i] = float_to_half(x[i]);
}

/* Positions a group's query heads take in turn: their keys (or values) stay in the first-level cache meanwhile, so the
 * heads that share a key/value head read it from memory once. A multiple of eight. */
#define ATTENTION_RUN 64

static int64_t parts_of(int64_t span) { return (span + ATTENTION_PART - 1) / ATTENTION_PART; }

/* One (row, key/value head, part) unit, with the query heads that read that head: each head's scores over the part's
 * positions, their exponentials against the part's largest, and the weighted sum of the values, computed as for that
 * head alone; the query heads take the positions in turns of ATTENTION_RUN, so they read the keys and values from
 * memory once. A row of one part gets its output; a part of a longer row leaves its sum, largest score and total in
 * `partials` for join_parts. `scores`: room for `group` heads' scores over `widest` positions, then their totals
 * and their largest scores. */
static void attend_unit(const attention_t *a, int64_t unit, float *scores) {
    int64_t r = 0;
    while (a->first[r + 1] <= unit) r++;
    int64_t span = a->positions[r] + 1, parts = parts_of(span), local = unit - a->first[r];
    int64_t g = local / parts, part = local % parts, group = a->heads / a->kv_heads, dim = a->dim;
    int64_t from = part * ATTENTION_PART, count = span - from < ATTENTION_PART ? span - from : ATTENTION_PART;
    int64_t first_head = r * a->heads + g * group;
    size_t head = (size_t)(((r * a->kv_heads + g) * a->capacity + from) * dim);
    const float *k = a->keys + head;
    const uint16_t *v = a->values + head;
    for (int64_t t = 0; t < count; t += ATTENTION_RUN) {
        int64_t end = t + ATTENTION_RUN < count ? t + ATTENTION_RUN : count;
        for (int64_t h = 0; h < group; h++)
            score_keys(a->query + (first_head + h) * dim, k, t, end, dim, a->scale, scores + h * a->widest);
    }
    float *totals = scores + group * a->widest, *tops = totals + group;
    for (int64_t h = 0; h < group; h++) {
        float *own = scores + h * a->widest;
        tops[h] = largest(own, count);
        totals[h] = exponentials(own, count, tops[h], own);
    }
    float *partial = parts == 1 ? NULL : a->partials + ((a->parts_before[r] + part) * a->heads + g * group) * (dim + 2);
    for (int64_t t = 0; t < count; t += ATTENTION_RUN) {
        int64_t end = t + ATTENTION_RUN < count ? t + ATTENTION_RUN : count;
        for (int64_t h = 0; h < group; h++) {
            float *o = partial == NULL ? a->out + (first_head + h) * dim : partial + h * (dim + 2);
            add_values(scores + h * a->widest, v, t, end, dim, o);
        }
    }
    for (int64_t h = 0; h < group; h++) {
        if (partial == NULL) {
            float *o = a->out + (first_head + h) * dim, inverse = 1.0f / totals[h];
            for (int64_t i = 0; i < dim; i++) o[i] *= inverse;
        } else {
            partial[h * (dim + 2) + dim] = tops[h];
            partial[h * (dim + 2) + dim + 1] = totals[h];
        }
    }
}

/* The output of each query head of a row of several parts, from its parts' sums: each part weighed by e^(its largest
 * score - the row's largest), the sums and the totals added in the parts' order. */
static void join_parts(const attention_t *a, int64_t r) {
    int64_t parts = parts_of(a->positions[r] + 1), dim = a->dim, size = a->heads * (dim + 2);
    const float *row = a->partials + a->parts_before[r] * size;
    for (int64_t h = 0; h < a->heads; h++) {
        float top = -INFINITY, total = 0.0f, *o = a->out + (r * a->heads + h) * dim;
        for (int64_t part = 0; part < parts; part++) {
            float own = row[part * size + h * (dim + 2) + dim];
            top = own > top ? own : top;
        }
        for (int64_t i = 0; i < dim; i++) o[i] = 0.0f;
        for (int64_t part = 0; part < parts; part++) {
            const float *sum = row + part * size + h * (dim + 2);
            float weight = expf(sum[dim] - top);
            for (int64_t i = 0; i < dim; i++) o[i] += weight * sum[i];
            total += weight * sum[dim + 1];
        }
        float inverse = 1.0f / total;
        for (int64_t i = 0; i < dim; i++) o[i] *= inverse;
    }
}

/* Units [first, end) of the rows' (row, key/value head, part) units. */
static void attention_units(const void *task, int64_t first, int64_t end) {
    attention_t *a = (attention_t *)task;
    int64_t group = a->heads / a->kv_heads;
    float *scores = malloc((size_t)(group * (a->widest + 2)) * sizeof(float));
    if (scores == NULL) {
        atomic_store(&a->failed, 1);
        return;
    }
    for (int64_t unit = first; unit < end; unit++) attend_unit(a, unit, scores);
    free(scores);
}

#define SHARED_ATTENTION 65536 /* multiply-adds below which attention stays on the calling thread */

int reef_decode_attention(const float *query, const float *new_keys, const float *new_values, float *keys,
                          uint16_t *values, const int64_t *positions, int64_t rows, int64_t heads, int64_t kv_heads,
                          int64_t capacity, int64_t dim, float scale, float *out, int threads) {
    int64_t longest = 1, work = 0, parts = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t g = 0; g < kv_heads; g++) {
            size_t cached = (size_t)(((r * kv_heads + g) * capacity + positions[r]) * dim);
            size_t fresh = (size_t)((r * kv_heads + g) * dim);
            memcpy(keys + cached, new_keys + fresh, (size_t)dim * sizeof(float));
            store_halves(new_values + fresh, dim, values + cached);
        }
        if (positions[r] + 1 > longest) longest = positions[r] + 1;
        work += (positions[r] + 1) * heads * dim * 2;
    }
    int64_t *first = malloc((size_t)(2 * rows + 1) * sizeof(int64_t));
    if (first == NULL) return -1;
    int64_t *parts_before = first + rows + 1;
    first[0] = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t own = parts_of(positions[r] + 1);
        first[r + 1] = first[r] + own * kv_heads;
        parts_before[r] = parts;
        parts += own > 1 ? own : 0;
    }
    float *partials = parts ? malloc((size_t)(parts * heads * (dim + 2)) * sizeof(float)) : NULL;
    if (parts && partials == NULL) {
        free(first);
        return -1;
    }
    attention_t task = {query, keys, values, positions, rows, heads, kv_heads, capacity, dim,
                        longest < ATTENTION_PART ? longest : ATTENTION_PART, first, parts_before, scale, out,
                        partials, 0};
    run_shared((job_t){attention_units, &task, first[rows], 0}, work < SHARED_ATTENTION ? 1 : threads);
    for (int64_t r = 0; r < rows && !atomic_load(&task.failed); r++)
        if (parts_of(positions[r] + 1) > 1) join_parts(&task, r);
    free(partials);
    free(first);
    return atomic_load(&task.failed) ? -1 : 0;
}

/* Greedy picking: each row's largest logit (the first of equal ones; the first NaN where the row has one, as torch's
 * argmax takes it) and its log-prob, x[t] - largest - log(sum over the row of e^(x - largest)). A row is taken in
 * parts of PICK_PART logits, each part's exponentials summed against its own largest (as attention sums them),
 * the parts joined in order: the same bits on any number of threads and beside any rows. */
#define PICK_PART 8192

typedef struct {
    const float *logits;
    int64_t vocab, parts;
    float *tops, *totals; /* per row and part: the part's largest logit, its exponentials' sum */
    int64_t *firsts;      /* per row and part: where its largest (or its first NaN) is */
} pick_t;

/* The largest of `count` logits, NaNs left out; *has_nan: whether there is a NaN among them. */
static float largest_logit(const float *x, int64_t count, int *has_nan) {
    float top = -INFINITY;
    int nan = 0;
    int64_t t = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    __m256 tops = _mm256_set1_ps(-INFINITY), nans = _mm256_setzero_ps();
    for (; t + 8 <= count; t += 8) {
        __m256 v = _mm256_loadu_ps(x + t);
        tops = _mm256_max_ps(v, tops); /* a NaN in v leaves the lane as it was (max returns its second operand) */
        nans = _mm256_or_ps(nans, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, tops);
    for (int lane = 0; lane < 8; lane++) top = lanes[lane] > top ? lanes[lane] : top;
    nan = _mm256_movemask_ps(nans) != 0;
#endif
    for (; t < count; t++) {
        top = x[t] > top ? x[t] : top;
        nan |= isnan(x[t]);
    }
    *has_nan = nan;
    return top;
}

static void pick_units(const void *task, int64_t first, int64_t end) {
    const pick_t *p = task;
    for (int64_t unit = first; unit < end; unit++) {
        int64_t part = unit % p->parts, from = part * PICK_PART;
        int64_t count = p->vocab - from < PICK_PART ? p->vocab - from : PICK_PART;
        const float *x = p->logits + unit / p->parts * p->vocab + from;
        int has_nan;
        float top = largest_logit(x, count, &has_nan);
        int64_t at = 0;
        if (has_nan) {
            while (!isnan(x[at])) at++;
            top = x[at];
        } else {
            while (at < count - 1 && x[at] != top) at++; /* a part of -inf only: its first */
        }
        p->tops[unit] = top;
        p->firsts[unit] = from + at;
        p->totals[unit] = top == -INFINITY ? 0.0f : exponentials(x, count, top, NULL); /* e^-inf: 0 each */
    }
}

/* tokens[r], logprobs[r]: row r's pick from `logits` [rows, vocab], on up to `threads` threads. Returns 0, or -1 when
 * memory ran out. */
int reef_pick_greedy(const float *logits, int64_t rows, int64_t vocab, int64_t *tokens, float *logprobs,
                     int threads) {
    int64_t parts = (vocab + PICK_PART - 1) / PICK_PART;
    float *room = malloc((size_t)(2 * rows * parts) * sizeof(float));
    int64_t *firsts = malloc((size_t)(rows * parts) * sizeof(int64_t));
    if (room == NULL || firsts == NULL) {
        free(room);
        free(firsts);
        return -1;
    }
    pick_t task = {logits, vocab, parts, room, room + rows * parts, firsts};
    run_shared((job_t){pick_units, &task, rows * parts, 0}, threads);
    for (int64_t r = 0; r < rows; r++) {
        const float *tops = task.tops + r * parts, *totals = task.totals + r * parts;
        int64_t best = 0;
        for (int64_t part = 1; part < parts; part++) {
            if (isnan(tops[best])) break;
            if (isnan(tops[part]) || tops[part] > tops[best]) best = part;
        }
        float top = tops[best], total = 0.0f;
        for (int64_t part = 0; part < parts; part++) total += totals[part] * exp_of_negative_one(tops[part] - top);
        tokens[r] = firsts[r * parts + best];
        logprobs[r] = (logits[r * vocab + tokens[r]] - top) - logf(total);
    }
    free(room);
    free(firsts);
    return 0;
}

/* The other parts of a Llama decoder layer, for one position per row, each row on its own. */

/* The sum of the squares of the n floats at x, as block_range sums: SUM_LANES running sums, x[i]^2 into sum
 * i % SUM_LANES in order, added pairwise after; the same order in every build, eight at a time where AVX2 is. */
static float sum_of_squares(const float *x, int64_t n) {
    float lanes[SUM_LANES] = {0.0f};
    int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    __m256 sums = _mm256_setzero_ps();
    for (; i + SUM_LANES <= n; i += SUM_LANES) {
        __m256 v = _mm256_loadu_ps(x + i);
        sums = _mm256_add_ps(sums, _mm256_mul_ps(v, v));
    }
    _mm256_storeu_ps(lanes, sums);
#endif
    for (; i < n; i++) lanes[i % SUM_LANES] += x[i] * x[i];
    return lane_total(lanes);
}

/* out[r] = weight * (x[r] / sqrt(mean(x[r]^2) + eps)), the squares summed as sum_of_squares sums them. */
void reef_rms_norm(const float *x, int64_t rows, int64_t n, const float *weight, float eps, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * n;
        float squares = sum_of_squares(row, n);
        float inverse = 1.0f / sqrtf(squares / (float)n + eps);
        for (int64_t i = 0; i < n; i++) out[r * n + i] = weight[i] * (row[i] * inverse);
    }
}

/* Rotary position embedding in place, as Llama applies it: x * cos + rotate_half(x) * sin, where rotate_half
 * swaps the two halves of a head and negates the new first one. x: [rows, heads, dim]; cos, sin: the tables
 * [positions, dim], row r at positions[r]. */
static void reef_rope(float *x, int64_t rows, int64_t heads, int64_t dim, const int64_t *positions, const float *cos,
                      const float *sin) {
    int64_t half = dim / 2;
    for (int64_t r = 0; r < rows; r++) {
        const float *c = cos + positions[r] * dim, *s = sin + positions[r] * dim;
        for (int64_t h = 0; h < heads; h++) {
            float *head = x + (r * heads + h) * dim;
            for (int64_t i = 0; i < half; i++) {
                float first = head[i], second = head[i + half];
                head[i] = first * c[i] + (-second) * s[i];
                head[i + half] = second * c[i + half] + first * s[i + half];
            }
        }
    }
}

/* gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g) taken as g / (1 + e) for g >= 0 and g e / (1 + e)
 * for g < 0, with e = e^-|g| as exp_of_negative makes it: eight at a time where AVX2 is, the same bits one at a
 * time. (libm's expf one at a time took 0.14 ms of a one-row step of SmolLM2 and 0.49 of a four-row one.) */
void reef_silu_mul(float *gate, const float *up, int64_t count) {
    int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= count; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = exp_of_negative(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_and_ps(g, magnitude)));
        __m256 negative = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
        __m256 top = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), negative);
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(top, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
#endif
    for (; i < count; i++) {
        float g = gate[i], e = exp_of_negative_one(0.0f - fabsf(g));
        gate[i] = (g < 0.0f ? g * e : g) / (1.0f + e) * up[i];
    }
}

/* x[i] += y[i] */
static void reef_add(float *x, const float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) x[i] += y[i];
}

/* One adapter's pair on one of a layer's products: A [rank, in] and B [out, rank] in fp32, and its scale. */
typedef struct {
    const float *a, *b;
    int64_t rank;
    float scale;
} reef_lora_t;

/* y[r] += scale * B (A x[r]) for each row r whose adapter adapts this product (lora[r] not NULL; lora NULL: none),
 * each row's delta on its own and in a fixed order. Returns 0, or -1 when memory ran out. */
static int add_lora(const float *x, int64_t rows, int64_t in, float *y, int64_t out, const reef_lora_t *const *lora) {
    if (lora == NULL) return 0;
    for (int64_t r = 0; r < rows; r++) {
        const reef_lora_t *pair = lora[r];
        if (pair == NULL) continue;
        float *t = malloc((size_t)(pair->rank > 0 ? pair->rank : 1) * sizeof(float));
        if (t == NULL) return -1;
        for (int64_t j = 0; j < pair->rank; j++) t[j] = dot(pair->a + j * in, x + r * in, in);
        for (int64_t o = 0; o < out; o++) y[r * out + o] += dot(pair->b + o * pair->rank, t, pair->rank) * pair->scale;
        free(t);
    }
    return 0;
}

/* One decoder layer's weights (the products' packed panels, the norms' fp32 weights) and sizes. */
typedef struct {
    const float *input_norm, *post_norm;
    const void *q, *k, *v, *o, *gate, *up, *down; /* their panels, in the formats below */
    int q_format, k_format, v_format, o_format, gate_format, up_format, down_format;
    int64_t hidden, heads, kv_heads, head_dim, intermediate;
    float eps, scale;
} reef_layer_t;

/* Room for a layer's intermediate results: rows x (hidden, heads*dim, kv*dim twice, heads*dim, hidden, intermediate
 * twice) floats. */
typedef struct {
    float *normed, *q, *k, *v, *attended, *out, *gate, *up;
} reef_scratch_t;

/* A whole decoder layer for one new position per row, row r's at positions[r], `hidden` [rows, hidden] updated in
 * place (the residual stream); `cos` and `sin` are the rotary tables [positions, head_dim]. `lora`: NULL, or for
 * each product (q, k, v, o, gate, up, down in that order) one entry per row, the row's adapter's pair on that
 * product or NULL, each delta added to its product's output as it is made. A row gets the same bits alone or in any
 * batch. Returns 0, or -1 when memory ran out. */
static int decode_layer(const reef_layer_t *layer, float *hidden, int64_t rows, const float *cos, const float *sin,
                        float *keys, uint16_t *values, const int64_t *positions, int64_t capacity,
                        const reef_scratch_t *s, const reef_lora_t *const *lora, int threads) {
    int64_t h = layer->hidden, attention = layer->heads * layer->head_dim, kv = layer->kv_heads * layer->head_dim;
    int failed = 0;
#define ADAPTED(product) (lora == NULL ? NULL : lora + (product) * rows)
    reef_rms_norm(hidden, rows, h, layer->input_norm, layer->eps, s->normed);
    weight_t qkv[3] = {{layer->q, layer->q_format, attention, s->q}, {layer->k, layer->k_format, kv, s->k},
                       {layer->v, layer->v_format, kv, s->v}};
    failed |= multiply(s->normed, rows, h, qkv, 3, threads);
    failed |= add_lora(s->normed, rows, h, s->q, attention, ADAPTED(0));
    failed |= add_lora(s->normed, rows, h, s->k, kv, ADAPTED(1));
    failed |= add_lora(s->normed, rows, h, s->v, kv, ADAPTED(2));
    reef_rope(s->q, rows, layer->heads, layer->head_dim, positions, cos, sin);
    reef_rope(s->k, rows, layer->kv_heads, layer->head_dim, positions, cos, sin);
    failed |= reef_decode_attention(s->q, s->k, s->v, keys, values, positions, rows, layer->heads, layer->kv_heads,
                                    capacity, layer->head_dim, layer->scale, s->attended, threads);
    weight_t o = {layer->o, layer->o_format, h, s->out};
    failed |= multiply(s->attended, rows, attention, &o, 1, threads);
    failed |= add_lora(s->attended, rows, attention, s->out, h, ADAPTED(3));
    reef_add(hidden, s->out, rows * h);
    reef_rms_norm(hidden, rows, h, layer->post_norm, layer->eps, s->normed);
    weight_t gate_up[2] = {{layer->gate, layer->gate_format, layer->intermediate, s->gate},
                           {layer->up, layer->up_format, layer->intermediate, s->up}};
    failed |= multiply(s->normed, rows, h, gate_up, 2, threads);
    failed |= add_lora(s->normed, rows, h, s->gate, layer->intermediate, ADAPTED(4));
    failed |= add_lora(s->normed, rows, h, s->up, layer->intermediate, ADAPTED(5));
    reef_silu_mul(s->gate, s->up, rows * layer->intermediate);
    weight_t down = {layer->down, layer->down_format, h, s->out};
    failed |= multiply(s->gate, rows, layer->intermediate, &down, 1, threads);
    failed |= add_lora(s->gate, rows, layer->intermediate, s->out, h, ADAPTED(6));
    reef_add(hidden, s->out, rows * h);
#undef ADAPTED
    return failed ? -1 : 0;
}

/* What a decoding step reads besides the layers: the embeddings ([vocab, hidden] fp32), the final norm's weight and
 * the output head's panels (NULL: the caller makes the logits, as when an adapter adapts the head). */
typedef struct {
    const reef_layer_t *layers;
    int64_t count;
    const float *embedding, *final_norm;
    const void *head;
    int head_format;
    int64_t vocab;
    float eps;
} reef_model_t;

/* A whole decoding step, one new token per row: row r's residual stream (`hidden`, [rows, hidden]) starts as the
 * embedding of tokens[r], goes through every decoder layer in order as `decode_layer` (layer i writing into the
 * cache at keys[i] and values[i] and, when `lora` is not NULL, reading its adapters' pairs at lora[i]), then the
 * final norm into `normed`, and the head's product into `logits` ([rows, vocab]) where the model gives its head.
 * `cos` and `sin`: the rotary tables, [positions, head_dim], covering every row's position. Where `greedy` is not
 * NULL and the head was made, each row r with greedy[r] set gets its pick from its logits into picked[r] and
 * picked_logprobs[r], as reef_pick_greedy makes it (one call less a step: its Python ran cold, as above).
 * One call a step: the Python around each of these parts cost more than they did, run cold after the weights had
 * swept the caches. Returns 0; -1 when memory ran out (what follows is not run); -2 when a token is not in the
 * vocabulary (nothing is run). */
int reef_decode_step(const reef_model_t *model, const int64_t *tokens, int64_t rows, float *hidden, const float *cos,
                     const float *sin, float *const *keys, uint16_t *const *values, const int64_t *positions,
                     int64_t capacity, const reef_scratch_t *s, const reef_lora_t *const *const *lora, float *normed,
                     float *logits, const uint8_t *greedy, int64_t *picked, float *picked_logprobs, int threads) {
    if (model->count < 1) return 0;
    int64_t h = model->layers[0].hidden;
    for (int64_t r = 0; r < rows; r++)
        if (tokens[r] < 0 || tokens[r] >= model->vocab) return -2;
    for (int64_t r = 0; r < rows; r++)
        memcpy(hidden + r * h, model->embedding + tokens[r] * h, (size_t)h * sizeof(float));
    for (int64_t i = 0; i < model->count; i++)
        if (decode_layer(&model->layers[i], hidden, rows, cos, sin, keys[i], values[i], positions, capacity, s,
                         lora == NULL ? NULL : lora[i], threads))
            return -1;
    reef_rms_norm(hidden, rows, h, model->final_norm, model->eps, normed);
    if (model->head == NULL) return 0;
    weight_t head = {model->head, model->head_format, model->vocab, logits};
    if (multiply(normed, rows, h, &head, 1, threads)) return -1;
    if (greedy == NULL) return 0;
    int64_t chosen = 0;
    for (int64_t r = 0; r < rows; r++) chosen += greedy[r] != 0;
    if (chosen == rows) return reef_pick_greedy(logits, rows, model->vocab, picked, picked_logprobs, threads);
    for (int64_t r = 0; r < rows; r++)
        if (greedy[r] && reef_pick_greedy(logits + r * model->vocab, 1, model->vocab, picked + r, picked_logprobs + r,
                                          threads))
            return -1;
    return 0;
}

/* Up to `steps` decoding steps of rows all decoded greedily, each step's picks the tokens of the next: row r at
 * positions[r], positions[r] + 1, ..., each step as `reef_decode_step` makes it (the same bits as steps taken one
 * call at a time), its picks into picked[step * rows + r] and picked_logprobs[step * rows + r]; `logits` holds the
 * last step's. It stops after a step where a row picked one of the `end_count` ids at `end_ids`. One call for several
 * tokens: the Python around a step, run cold after the weights swept the caches, cost ~0.3 ms a served step.
 * Returns the steps taken (at least 1); reef_decode_step's -1 or -2 (the steps before it were taken: their picks are
 * written); -3 when a row would pass `capacity` or the model gives no head (nothing is run). */
int reef_decode_steps(const reef_model_t *model, const int64_t *tokens, int64_t rows, float *hidden, const float *cos,
                      const float *sin, float *const *keys, uint16_t *const *values, const int64_t *positions,
                      int64_t capacity, const reef_scratch_t *s, const reef_lora_t *const *const *lora, float *normed,
                      float *logits, int64_t steps, const int64_t *end_ids, int64_t end_count, int64_t *picked,
                      float *picked_logprobs, int threads) {
    if (model->head == NULL || steps < 1) return -3;
    for (int64_t r = 0; r < rows; r++)
        if (positions[r] + steps > capacity) return -3;
    int64_t *at = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(int64_t));
    uint8_t *greedy = malloc((size_t)(rows > 0 ? rows : 1));
    if (at == NULL || greedy == NULL) {
        free(at);
        free(greedy);
        return -1;
    }
    memcpy(at, positions, (size_t)rows * sizeof(int64_t));
    memset(greedy, 1, (size_t)rows);
    int64_t taken = 0;
    int failed = 0;
    while (taken < steps) {
        const int64_t *in = taken == 0 ? tokens : picked + (taken - 1) * rows;
        failed = reef_decode_step(model, in, rows, hidden, cos, sin, keys, values, at, capacity, s, lora, normed,
                                  logits, greedy, picked + taken * rows, picked_logprobs + taken * rows, threads);
        if (failed) break;
        int ended = 0;
        for (int64_t r = 0; r < rows; r++) {
            at[r]++;
            for (int64_t e = 0; e < end_count; e++) ended |= picked[taken * rows + r] == end_ids[e];
        }
        taken++;
        if (ended) break;
    }
    free(at);
    free(greedy);
    return failed ? failed : (int)taken;
}
