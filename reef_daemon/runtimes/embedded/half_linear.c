/* y = x W^T for decoding: fp32 inputs, fp16 weights, fp32 sums, one pass over the weights for every row.
 *
 * The weights are packed in panels of PANEL output features: panel p holds, for every input feature k in order,
 * the PANEL weights W[p * PANEL + j][k] (fp16 bits, zero past the last feature). Each output y[r][n] is the sum over
 * k = 0, 1, ..., K - 1, in that order, of x[r][k] * W[n][k], each step one fused multiply-add in fp32 (or, without
 * FMA, a multiply and an add, each rounded). Rows are handled a few at a time, but the order and rounding of one
 * output's sum never depend on how many rows there are or which rows share a pass: a row gets the same bits alone or
 * in any batch. The weights of a panel are read once per group of rows and converted to fp32 in registers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

typedef struct {
    const float *x;
    int64_t rows, k_count, n_count;
    const uint16_t *packed;
    float *y;
} product_t;

/* Panels [first_panel, end_panel) of one product. */
static void panels(const product_t *p, int64_t first_panel, int64_t end_panel) {
    float out[GROUP * PANEL];
    for (int64_t index = first_panel; index < end_panel; index++) {
        int64_t first = index * PANEL;
        const uint16_t *panel = p->packed + first * p->k_count;
        int64_t width = p->n_count - first < PANEL ? p->n_count - first : PANEL;
        for (int64_t row = 0; row < p->rows; row += GROUP) {
            int group = p->rows - row < GROUP ? (int)(p->rows - row) : GROUP;
            pass(p->x + row * p->k_count, p->k_count, panel, out, group);
            for (int r = 0; r < group; r++)
                memcpy(p->y + (row + r) * p->n_count + first, out + r * PANEL, (size_t)width * sizeof(float));
        }
    }
}

/* Helper threads. A product's panels are shared out in fixed slices, one per thread; each output is computed as
 * above whichever thread does it, so the result does not depend on the number of threads either. Between products a
 * helper spins briefly (the next product of a layer usually follows within microseconds), then sleeps. */
#define MAX_THREADS 64
#define SPIN_NS 50000

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER;
static int helpers;                 /* started helper threads; helper i takes slice i + 1 */
static product_t current;           /* the product being computed */
static int slices;                  /* how many slices it is shared out in */
static _Atomic int64_t generation;  /* counts products; a helper works when it sees a new one */
static _Atomic int unfinished;      /* helpers' slices of the current product still being computed */

static void slice(const product_t *p, int index, int count) {
    int64_t total = (p->n_count + PANEL - 1) / PANEL;
    panels(p, total * index / count, total * (index + 1) / count);
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
        seen = atomic_load(&generation); /* the product and its slices as of this generation, taken together */
        product_t product = current;
        int count = slices;
        pthread_mutex_unlock(&pool_lock);
        if (index < count) {
            slice(&product, index, count);
            atomic_fetch_sub_explicit(&unfinished, 1, memory_order_release);
        }
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

static pthread_mutex_t pool_user = PTHREAD_MUTEX_INITIALIZER; /* held by the one product using the helpers */

/* x: rows x k_count fp32; packed: ceil(n_count / PANEL) panels of k_count x PANEL fp16; y: rows x n_count fp32.
 * Computed on up to `threads` threads (this one and helpers). Calls may overlap (two models in one process): one
 * of them uses the helpers, the others compute on their own thread. */
void reef_half_linear(const float *x, int64_t rows, int64_t k_count, const uint16_t *packed, int64_t n_count,
                      float *y, int threads) {
    product_t product = {x, rows, k_count, n_count, packed, y};
    int64_t total = (n_count + PANEL - 1) / PANEL;
    int count = threads < MAX_THREADS ? threads : MAX_THREADS;
    if (count > total) count = (int)total;
    if (count > 1 && pthread_mutex_trylock(&pool_user) != 0) count = 1;
    if (count > 1) {
        count = 1 + (start_helpers(count - 1) < count - 1 ? helpers : count - 1);
        if (count <= 1) pthread_mutex_unlock(&pool_user);
    }
    if (count <= 1) {
        panels(&product, 0, total);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    current = product;
    slices = count;
    atomic_store(&unfinished, count - 1);
    atomic_fetch_add_explicit(&generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_lock);
    slice(&product, 0, count);
    while (atomic_load_explicit(&unfinished, memory_order_acquire) > 0) {
    }
    pthread_mutex_unlock(&pool_user);
}
