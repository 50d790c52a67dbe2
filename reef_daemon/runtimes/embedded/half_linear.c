/* y = x W^T for decoding: fp32 inputs, fp16 weights, fp32 sums, one pass over the weights for every row.
 *
 * The weights are packed in panels of PANEL output features: panel p holds, for every input feature k in order,
 * the PANEL weights W[p * PANEL + j][k] (fp16 bits, zero past the last feature). Each output y[r][n] is the sum over
 * k = 0, 1, ..., K - 1, in that order, of x[r][k] * W[n][k], each step one fused multiply-add in fp32 (or, without
 * FMA, a multiply and an add, each rounded). Rows are handled a few at a time, but the order and rounding of one
 * output's sum never depend on how many rows there are or which rows share a pass: a row gets the same bits alone or
 * in any batch. The weights of a panel are read once per group of rows and converted to fp32 in registers.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PANEL 32
#define GROUP 3 /* rows per pass over a panel: GROUP x PANEL / 8 accumulators stay in AVX2 registers */

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>

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

static void pass(const float *x, int64_t k_count, const uint16_t *panel, float *out, int rows) {
    /* Constant row counts, so each pass keeps its accumulators in registers. */
    if (rows == 3)
        panel_pass(x, k_count, panel, out, 3);
    else if (rows == 2)
        panel_pass(x, k_count, panel, out, 2);
    else
        panel_pass(x, k_count, panel, out, 1);
}

const char *reef_half_linear_kind(void) { return "avx2-f16c-fma"; }

#else

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        exponent = 113;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

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

const char *reef_half_linear_kind(void) { return "portable"; }

#endif

/* x: rows x k_count fp32; packed: ceil(n_count / PANEL) panels of k_count x PANEL fp16; y: rows x n_count fp32. */
void reef_half_linear(const float *x, int64_t rows, int64_t k_count, const uint16_t *packed, int64_t n_count,
                      float *y) {
    float out[GROUP * PANEL];
    for (int64_t first = 0; first < n_count; first += PANEL) {
        const uint16_t *panel = packed + first * k_count;
        int64_t width = n_count - first < PANEL ? n_count - first : PANEL;
        for (int64_t row = 0; row < rows; row += GROUP) {
            int group = rows - row < GROUP ? (int)(rows - row) : GROUP;
            pass(x + row * k_count, k_count, panel, out, group);
            for (int r = 0; r < group; r++)
                memcpy(y + (row + r) * n_count + first, out + r * PANEL, (size_t)width * sizeof(float));
        }
    }
}
