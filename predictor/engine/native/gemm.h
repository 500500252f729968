/* The torch engine's prefill GEMM: out[n][cols] = x[n][rows] @ W for a long chunk of tokens, W in matvec.h's
 * 64-column panels and its format (fp32, bf16, int8 with per-column scales), read in place.
 *
 * Why not torch: torch cannot multiply fp32 activations by bf16 or int8 weights, so each prefill pass converted
 * every matrix to fp32 (1.4 GB written and read back per pass at Qwen2.5-Coder-0.5B's shape), multiplied the
 * panels as a batch of [n, 64] products and copied the result out of the panel order: at 1008 tokens, 2 threads,
 * aten::copy_ was 0.54 s of a 6.4 s prefill and the panel bmm ran at 149 GFLOP/s where one dense fp32 GEMM runs
 * at 160-190.  Here a block of KB panel rows is converted once into an L2-sized buffer on the thread's stack and
 * swept by every tile of MR tokens, whose sums are fused multiply-adds kept in registers.
 *
 * Numbers: each output lane is a sum over the rows in order, from zero, with fused multiply-adds (one rounding a
 * term, where the native step rounds twice), then times the int8 scale.  So these are not the native step's bits
 * (matvec.h keeps those for the torch-free prefill); they are fp32 sums, as torch's GEMM gives, in another order.
 *
 * Work is split between the threads as (panel, run of tokens) pairs, panel-major, so a thread converts a panel
 * block once for the many tokens of its run.  Included once, by decode.c (after matvec.h: wload, wget, v8). */

#define GEMM_KB 256     /* panel rows converted at a time: 64 KB of fp32, in L2 beside the tokens' rows */
#define GEMM_TOKENS 96  /* tokens a work item sweeps the converted block with */

#ifdef __AVX512F__
#define GEMM_MR 6 /* 6 tokens x 4 vectors of 16: 24 accumulators, 4 weight vectors, 32 registers */
__attribute__((always_inline))
static inline void gemm_tile(const float *x, int64_t xs, const int NT, const float *wb, int k0, int k1, float *out,
                             int64_t os, int first) {
    __m512 a[4 * GEMM_MR];
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < 4; c++) a[4 * t + c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + t * os + 16 * c);
    for (int i = k0; i < k1; i++) {
        const float *wr = wb + (int64_t)(i - k0) * 64;
        const __m512 w0 = _mm512_loadu_ps(wr), w1 = _mm512_loadu_ps(wr + 16);
        const __m512 w2 = _mm512_loadu_ps(wr + 32), w3 = _mm512_loadu_ps(wr + 48);
        for (int t = 0; t < NT; t++) {
            const __m512 xi = _mm512_set1_ps(x[t * xs + i]);
            a[4 * t] = _mm512_fmadd_ps(xi, w0, a[4 * t]);
            a[4 * t + 1] = _mm512_fmadd_ps(xi, w1, a[4 * t + 1]);
            a[4 * t + 2] = _mm512_fmadd_ps(xi, w2, a[4 * t + 2]);
            a[4 * t + 3] = _mm512_fmadd_ps(xi, w3, a[4 * t + 3]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(out + t * os + 16 * c, a[4 * t + c]);
}
#else
#define GEMM_MR 6 /* 8-float vectors: 6 tokens x 2 vectors (16 columns, a quarter panel at a time) in 16 registers */
__attribute__((optimize("fp-contract=fast"), always_inline))
static inline void gemm_tile(const float *x, int64_t xs, const int NT, const float *wb, int k0, int k1, float *out,
                             int64_t os, int first) {
    for (int q = 0; q < 64; q += 16) {
        v8 a[2 * GEMM_MR];
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < 2; c++) a[2 * t + c] = first ? splat(0.0f) : load8(out + t * os + q + 8 * c);
        for (int i = k0; i < k1; i++) {
            const float *wr = wb + (int64_t)(i - k0) * 64 + q;
            const v8 w0 = load8(wr), w1 = load8(wr + 8);
            for (int t = 0; t < NT; t++) {
                const v8 xi = splat(x[t * xs + i]);
                a[2 * t] += xi * w0;  /* contracted to one fused multiply-add (the attribute above) */
                a[2 * t + 1] += xi * w1;
            }
        }
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < 2; c++) store8(out + t * os + q + 8 * c, a[2 * t + c]);
    }
}
#endif

static void gemm_tiles(const float *x, int64_t xs, int nt, const float *wb, int k0, int k1, float *out, int64_t os,
                       int first) {
    switch (nt) {  /* NT a constant in each, so the accumulators stay in registers */
        case 1: gemm_tile(x, xs, 1, wb, k0, k1, out, os, first); break;
        case 2: gemm_tile(x, xs, 2, wb, k0, k1, out, os, first); break;
        case 3: gemm_tile(x, xs, 3, wb, k0, k1, out, os, first); break;
        case 4: gemm_tile(x, xs, 4, wb, k0, k1, out, os, first); break;
        case 5: gemm_tile(x, xs, 5, wb, k0, k1, out, os, first); break;
        default: gemm_tile(x, xs, GEMM_MR, wb, k0, k1, out, os, first); break;
    }
}

/* nt tokens (x's rows, xs floats apart) against the full panel at column lo, into out (out[t][0..63] for token t,
 * rows os floats apart): the sums of columns lo .. lo + 63, times their int8 scales. */
static void gemm_panel(const float *x, int64_t xs, int nt, const void *w, int T, int rows, int lo, float *out,
                       int64_t os, const float *scale) {
    float buf[GEMM_KB * 64] __attribute__((aligned(64)));
    const int64_t base = (int64_t)lo * rows;
    for (int k0 = 0; k0 < rows; k0 += GEMM_KB) {
        const int k1 = k0 + GEMM_KB < rows ? k0 + GEMM_KB : rows;
        const float *wb = (const float *)w + base + (int64_t)k0 * 64;
        if (T != 0) {
            const int64_t from = base + (int64_t)k0 * 64, count = (int64_t)(k1 - k0) * 64;
            for (int64_t j = 0; j < count; j += 8) store8(buf + j, wload(w, from + j, T));
            wb = buf;
        }
        for (int t = 0; t < nt; t += GEMM_MR)
            gemm_tiles(x + t * xs, xs, nt - t < GEMM_MR ? nt - t : GEMM_MR, wb, k0, k1, out + t * os, os, k0 == 0);
    }
    if (T == 2)
        for (int t = 0; t < nt; t++)
            for (int c = 0; c < 64; c += 8) store8(out + t * os + c, load8(out + t * os + c) * load8(scale + lo + c));
}

static void gemm_panel_t(const float *x, int64_t xs, int nt, const void *w, int T, int rows, int lo, float *out,
                         int64_t os, const float *scale) {
    if (T == 1) gemm_panel(x, xs, nt, w, 1, rows, lo, out, os, scale);  /* T a constant: wload inlined per format */
    else if (T == 2) gemm_panel(x, xs, nt, w, 2, rows, lo, out, os, scale);
    else gemm_panel(x, xs, nt, w, 0, rows, lo, out, os, scale);
}

/* The partial last panel (cols not a multiple of 64), token by token. */
__attribute__((optimize("fp-contract=fast")))
static void gemm_narrow(const float *x, int64_t xs, int t0, int t1, const void *w, int T, int rows, int lo, int cols,
                        float *out, int64_t os, const float *scale) {
    const int64_t base = (int64_t)lo * rows;
    const int width = cols - lo;
    for (int t = t0; t < t1; t++) {
        float *o = out + t * os + lo;
        for (int j = 0; j < width; j++) o[j] = 0.0f;
        for (int i = 0; i < rows; i++) {
            const float xi = x[t * xs + i];
            for (int j = 0; j < width; j++) o[j] += xi * wget(w, base + (int64_t)i * width + j, T);
        }
        if (T == 2)
            for (int j = 0; j < width; j++) o[j] *= scale[lo + j];
    }
}

static void gemm_item(const float *x, int n, const void *w, int T, int rows, int cols, const float *scale, float *out,
                      int panel, int run) {
    const int t0 = run * GEMM_TOKENS, t1 = t0 + GEMM_TOKENS < n ? t0 + GEMM_TOKENS : n, lo = panel * 64;
    if (lo + 64 <= cols) gemm_panel_t(x + (int64_t)t0 * rows, rows, t1 - t0, w, T, rows, lo, out + (int64_t)t0 * cols + lo,
                                      cols, scale);
    else gemm_narrow(x, rows, t0, t1, w, T, rows, lo, cols, out, cols, scale);
}

/* out[n][cols] = x[n][rows] @ W, W [rows, cols] in panels of format wtype (scale: int8's per column, else NULL);
 * x and out contiguous.  0, or -1 for arguments out of range. */
int32_t tabd_matmul(const float *x, int32_t n, const void *w, int32_t wtype, int32_t rows, int32_t cols,
                    const float *scale, float *out, int32_t threads) {
    if (n < 1 || rows < 1 || cols < 1 || wtype < 0 || wtype > 2 || (wtype == 2 && !scale)) return -1;
    const int panels = (cols + 63) / 64, runs = (n + GEMM_TOKENS - 1) / GEMM_TOKENS, items = panels * runs;
    const int nthreads = threads > 0 ? (threads < items ? threads : items) : 1;
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int i = 0; i < items; i++) gemm_item(x, n, w, wtype, rows, cols, scale, out, i / runs, i % runs);
    return 0;
}

/* silu(g) = g / (1 + exp(-g)), torch's formula, eight at a time with decode.c's exp8 (relative error about 2e-7;
 * libm's expf, one call per element, was 0.5 s of a 1k prefill at Qwen2.5-Coder-0.5B's shape on one thread).  exp8
 * is written for the softmax's x <= 0; here -g is held at 88 at most, where exp is still finite (1.7e38) and
 * g / (1 + exp(-g)) is -0 as it would be. */
static inline v8 silu8(v8 g) {
    v8 e = -g;
    const i8 over = e > splat(88.0f);
    e = (v8)(((i8)e & ~over) | ((i8)splat(88.0f) & over));
    return g / (splat(1.0f) + exp8(e));
}

/* SwiGLU's first half for a [rows, 2 inter] gate_up matrix (gate columns, then up columns; inter a multiple of 64):
 * out[n][inter] = silu(x @ gate) * (x @ up), each gate panel and its up panel summed into buffers on the stack and
 * combined there, so the [n, 2 inter] product is never written out and read back (at Qwen2.5-Coder-0.5B's shape
 * and 1008 tokens, 39 MB a layer, past L3). */
int32_t tabd_matmul_swiglu(const float *x, int32_t n, const void *w, int32_t wtype, int32_t rows, int32_t inter,
                           const float *scale, float *out, int32_t threads) {
    if (n < 1 || rows < 1 || inter < 64 || inter % 64 || wtype < 0 || wtype > 2 || (wtype == 2 && !scale)) return -1;
    const int panels = inter / 64, runs = (n + GEMM_TOKENS - 1) / GEMM_TOKENS, items = panels * runs;
    const int nthreads = threads > 0 ? (threads < items ? threads : items) : 1;
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int i = 0; i < items; i++) {
        const int panel = i / runs, t0 = (i % runs) * GEMM_TOKENS, nt = (t0 + GEMM_TOKENS < n ? t0 + GEMM_TOKENS : n) - t0;
        float g[GEMM_TOKENS * 64] __attribute__((aligned(64))), u[GEMM_TOKENS * 64] __attribute__((aligned(64)));
        const float *xt = x + (int64_t)t0 * rows;
        gemm_panel_t(xt, rows, nt, w, wtype, rows, panel * 64, g, 64, scale);
        gemm_panel_t(xt, rows, nt, w, wtype, rows, inter + panel * 64, u, 64, scale);
        for (int t = 0; t < nt; t++) {
            float *o = out + (int64_t)(t0 + t) * inter + panel * 64;
            for (int j = 0; j < 64; j += 8) store8(o + j, silu8(load8(g + t * 64 + j)) * load8(u + t * 64 + j));
        }
    }
    return 0;
}

/* A torch prefill's queries, keys and values for one layer, from the qkv product ([n][(heads + 2 kv) d], in place:
 * the bias added, q and k rotated): q out as [heads][n][d] (what attention reads), k and v into the layer's cache
 * ([kv][capacity][d]) at positions pos .. pos + n - 1.  The same operations, in the same order, as the torch code it
 * replaces (x + b, then x * cos + rotate_half(x) * sin, rounded per operation), so the same bits, in one pass
 * instead of eight torch ops over the chunk. */
int32_t tabd_qkv_rope(float *qkv, int32_t n, const float *bias, const float *cos, const float *sin, int32_t heads,
                      int32_t kv, int32_t d, float *q, float *kcache, float *vcache, int32_t capacity, int32_t pos,
                      int32_t threads) {
    if (n < 1 || heads < 1 || kv < 1 || d < 2 || d > 512 || d % 2 || pos < 0 || pos + n > capacity) return -1;  /* rope's buffer */
    const int nq = heads * d, nqkv = (heads + 2 * kv) * d;
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (int t = 0; t < n; t++) {
        float *row = qkv + (int64_t)t * nqkv;
        const float *c = cos + (int64_t)(pos + t) * d, *s = sin + (int64_t)(pos + t) * d;
        if (bias)
            for (int j = 0; j < nqkv; j++) row[j] += bias[j];
        for (int hd = 0; hd < heads + kv; hd++) rope(row + hd * d, c, s, d);
        for (int hd = 0; hd < heads; hd++) memcpy(q + ((int64_t)hd * n + t) * d, row + hd * d, sizeof(float) * d);
        for (int g = 0; g < kv; g++) {
            memcpy(kcache + ((int64_t)g * capacity + pos + t) * d, row + nq + g * d, sizeof(float) * d);
            memcpy(vcache + ((int64_t)g * capacity + pos + t) * d, row + nq + kv * d + g * d, sizeof(float) * d);
        }
    }
    return 0;
}

/* A torch prefill's residual and norm in one pass: x[t] += add[t] (add may be NULL), then out[t] = rmsnorm(x[t]) * w,
 * as the native step computes it. One parallel region where torch ran seven ops (pow, mean, add, rsqrt, two muls
 * and the residual add), each with its own barrier: on a machine others share, a barrier waits out the time slice
 * of a thread that was descheduled. */
void tabd_add_rmsnorm(float *x, const float *add, int32_t n, int32_t hidden, const float *w, float eps, float *out,
                      int32_t threads) {
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
    for (int t = 0; t < n; t++) {
        float *xt = x + (int64_t)t * hidden;
        if (add)
            for (int i = 0; i < hidden; i++) xt[i] += add[(int64_t)t * hidden + i];
        rmsnorm(xt, w, hidden, eps, out + (int64_t)t * hidden);
    }
}

/* Which vector kernel tabd_matmul runs here (what the bench reports beside its figures). */
const char *tabd_gemm_isa(void) {
#ifdef __AVX512F__
    return "avx512 (6 tokens x 64 columns a tile)";
#elif defined(__AVX2__) && defined(__FMA__)
    return "avx2+fma (6 tokens x 16 columns a tile)";
#else
    return "generic vectors (6 tokens x 16 columns a tile)";
#endif
}
