/* decode.c's weight kernels: fp32/bf16/int8 loads, x @ W over 64-column panels for up to MAXB tokens at a
 * time, and the lm_head's row dot products.  Included once, by decode.c (it defines v8, load8 and MAXB). */
/* Eight horizontal sums at once: out[i] = sum of the lanes of r[i]. */
static inline v8 hsum8(const v8 r[8]) {
#ifdef __AVX__
    __m256 a = _mm256_hadd_ps((__m256)r[0], (__m256)r[1]), b = _mm256_hadd_ps((__m256)r[2], (__m256)r[3]);
    __m256 c = _mm256_hadd_ps((__m256)r[4], (__m256)r[5]), d = _mm256_hadd_ps((__m256)r[6], (__m256)r[7]);
    __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    __m256 lo = _mm256_permute2f128_ps(ab, cd, 0x20), hi = _mm256_permute2f128_ps(ab, cd, 0x31);
    return (v8)_mm256_add_ps(lo, hi);
#else
    v8 out;
    for (int i = 0; i < 8; i++) out[i] = hsum(r[i]);
    return out;
#endif
}

/* Eight weights as fp32, from fp32, bf16 or int8 storage (T is a constant where this is inlined). */
static inline v8 wload(const void *w, int64_t i, const int T) {
    if (T == 0) return load8((const float *)w + i);
#ifdef __AVX2__
    if (T == 1) {
        const __m128i u = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
        return (v8)_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(u), 16));
    }
    return (v8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)w + i))));
#else
    v8 r;
    for (int k = 0; k < 8; k++) {
        if (T == 1) { uint32_t b = (uint32_t)((const uint16_t *)w)[i + k] << 16; memcpy(&r[k], &b, 4); }
        else r[k] = (float)((const int8_t *)w)[i + k];
    }
    return r;
#endif
}

static inline float wget(const void *w, int64_t i, const int T) {
    if (T == 0) return ((const float *)w)[i];
    if (T == 1) { uint32_t b = (uint32_t)((const uint16_t *)w)[i] << 16; float f; memcpy(&f, &b, 4); return f; }
    return (float)((const int8_t *)w)[i];
}

/* out[t][lo:lo+64] = x[t][rows] @ w[rows, cols][:, lo:lo+64] for NT <= 4 tokens at once, so the panel
 * streams once for all of them.  The weights are packed in panels: the block of columns [lo, hi) is
 * stored as its own contiguous [rows, hi - lo] matrix at w + lo * rows.  Each output lane sums row by
 * row from zero, whatever NT is, so one token alone gets the same bits as in a batch. */
__attribute__((optimize("fp-contract=fast"), always_inline))
static inline void mv_panel(const float *x, int64_t xs, const int NT, const void *w, const int T, int rows, int lo,
                            float *out, int64_t os, const float *scale) {
    const int SWV = NT == 1 ? 8 : NT == 2 ? 4 : 2; /* vectors per token per stripe: at most 8 accumulators */
    const int64_t base = (int64_t)lo * rows;
    for (int s = 0; s < 8; s += SWV) {
        v8 a[8];
        for (int k = 0; k < NT * SWV; k++) a[k] = splat(0.0f);
        for (int i = 0; i < rows; i++) {
            const int64_t wr = base + (int64_t)i * 64 + 8 * s;
            v8 wv[8];
            for (int c = 0; c < SWV; c++) wv[c] = wload(w, wr + 8 * c, T);
            for (int t = 0; t < NT; t++) {
                const v8 xi = splat(x[t * xs + i]);
                for (int c = 0; c < SWV; c++) a[t * SWV + c] += xi * wv[c];
            }
        }
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < SWV; c++) {
                v8 r = a[t * SWV + c];
                if (T == 2) r *= load8(scale + lo + 8 * (s + c));
                store8(out + t * os + lo + 8 * (s + c), r);
            }
    }
}

#ifdef __AVX512F__
/* Sixteen weights as fp32, from fp32, bf16 or int8 storage. */
static inline __m512 wload16(const void *w, int64_t i, const int T) {
    if (T == 0) return _mm512_loadu_ps((const float *)w + i);
    if (T == 1)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i))), 16));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const int8_t *)w + i))));
}

/* The weights PREFETCH_AHEAD elements on in the stream (a thread's panels lie end to end, so this runs on
 * into the next panel), asked into L2 while this row is summed.  A multi-token pass is as much arithmetic as
 * streaming, and without the hint the two added up (a pass of 5 tokens cost 1.55 steps, now 1.35-1.4); a
 * one-token step is streaming alone, the hardware prefetcher keeps up, and the hint gains it nothing.  Only a
 * hint: it never faults, past the end of the matrix too. */
#define PREFETCH_AHEAD 1024
static inline void prefetch_ahead(const void *w, int64_t at, const int T) {
    const int es = T == 0 ? 4 : T == 1 ? 2 : 1;
    const char *p = (const char *)w + (at + PREFETCH_AHEAD) * es;
    for (int line = 0; line < 64 * es; line += 64) __builtin_prefetch(p + line, 0, 2);
}

/* mv_panel for 2 <= NT <= 8 tokens in 512-bit registers: each 64-column row of the panel as four vectors, one
 * at a time against every token's accumulators (4 NT of them, up to all 32 registers; at 8 tokens the
 * compiler spills a few, still 15% under two sweeps), so the panel streams once, in order, and even two tokens
 * keep eight independent sums in flight.  (Two stripes of 32 columns, the layout before, left a pass of 2-3
 * tokens waiting on its adds and streamed the panel twice: 1.43 steps for 3 tokens, now 1.2.)  Each lane is
 * still sum + x_i * w_i, rounded twice, row by row from zero: the sequence mv_panel runs (inlined into code
 * built with -ffp-contract=off, its `a += xi * wv` is a multiply and an add, not a fused one), so a token gets
 * the same bits here as alone. */
__attribute__((always_inline))
static inline void mv_panel_z(const float *x, int64_t xs, const int NT, const void *w, const int T, int rows, int lo,
                              float *out, int64_t os, const float *scale) {
    const int64_t base = (int64_t)lo * rows;
    __m512 a[32];
    for (int k = 0; k < 4 * NT; k++) a[k] = _mm512_setzero_ps();
    for (int i = 0; i < rows; i++) {
        const int64_t wr = base + (int64_t)i * 64;
        prefetch_ahead(w, wr, T);
        for (int c = 0; c < 4; c++) {
            const __m512 wc = wload16(w, wr + 16 * c, T);
            for (int t = 0; t < NT; t++)
                a[4 * t + c] = _mm512_add_ps(a[4 * t + c], _mm512_mul_ps(_mm512_set1_ps(x[t * xs + i]), wc));
        }
    }
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < 4; c++) {
            __m512 r = a[4 * t + c];
            if (T == 2) r = _mm512_mul_ps(r, _mm512_loadu_ps(scale + lo + 16 * c));
            _mm512_storeu_ps(out + t * os + lo + 16 * c, r);
        }
}
#endif

/* A partial panel (fewer than 64 columns), one token at a time. */
__attribute__((optimize("fp-contract=fast"), always_inline))
static inline void mv_narrow(const float *x, const void *w, const int T, int rows, int lo, int hi, float *out,
                             const float *scale) {
    const int64_t base = (int64_t)lo * rows;
    const int width = hi - lo;
    for (int j = 0; j < width; j++) out[lo + j] = 0.0f;
    for (int i = 0; i < rows; i++) {
        const float xi = x[i];
        for (int j = 0; j < width; j++) out[lo + j] += xi * wget(w, base + (int64_t)i * width + j, T);
    }
    if (T == 2)
        for (int j = 0; j < width; j++) out[lo + j] *= scale[lo + j];
}

__attribute__((always_inline))
static inline void mv_block_t(const float *x, int64_t xs, int n, const void *w, const int T, int rows, int lo, int hi,
                              float *out, int64_t os, const float *scale) {
    if (hi - lo != 64) {
        for (int t = 0; t < n; t++) mv_narrow(x + t * xs, w, T, rows, lo, hi, out + t * os, scale);
        return;
    }
#ifdef __AVX512F__
    switch (n) {  /* a verify pass or a keystroke's few tokens: one stream of the panel for all of them */
        case 2: mv_panel_z(x, xs, 2, w, T, rows, lo, out, os, scale); return;
        case 3: mv_panel_z(x, xs, 3, w, T, rows, lo, out, os, scale); return;
        case 4: mv_panel_z(x, xs, 4, w, T, rows, lo, out, os, scale); return;
        case 5: mv_panel_z(x, xs, 5, w, T, rows, lo, out, os, scale); return;
        case 6: mv_panel_z(x, xs, 6, w, T, rows, lo, out, os, scale); return;
        case 7: mv_panel_z(x, xs, 7, w, T, rows, lo, out, os, scale); return;
        case 8: mv_panel_z(x, xs, 8, w, T, rows, lo, out, os, scale); return;
        default: break;
    }
#endif
    int t = 0;
    for (; t + 4 <= n; t += 4) mv_panel(x + t * xs, xs, 4, w, T, rows, lo, out + t * os, os, scale);
    switch (n - t) {
        case 3: mv_panel(x + t * xs, xs, 3, w, T, rows, lo, out + t * os, os, scale); break;
        case 2: mv_panel(x + t * xs, xs, 2, w, T, rows, lo, out + t * os, os, scale); break;
        case 1: mv_panel(x + t * xs, xs, 1, w, T, rows, lo, out + t * os, os, scale); break;
        default: break;
    }
}

static void mv_block(const float *x, int64_t xs, int n, const void *w, int T, int rows, int lo, int hi, float *out,
                     int64_t os, const float *scale) {
    if (T == 1) mv_block_t(x, xs, n, w, 1, rows, lo, hi, out, os, scale);
    else if (T == 2) mv_block_t(x, xs, n, w, 2, rows, lo, hi, out, os, scale);
    else mv_block_t(x, xs, n, w, 0, rows, lo, hi, out, os, scale);
}

/* Up to MAXP tokens: the panel is read from memory by the first group of MAXB and from L2 by the others (a panel
 * is at most rows x 64 weights: 1.2 MB at fp32 and 8960 rows, 0.6 at bf16).  Each token's lanes are the same
 * bits whatever group it is in. */
static void mv_groups(const float *x, int64_t xs, int n, const void *w, int T, int rows, int lo, int hi, float *out,
                      int64_t os, const float *scale) {
    for (int t0 = 0; t0 < n; t0 += MAXB)
        mv_block(x + t0 * xs, xs, n - t0 < MAXB ? n - t0 : MAXB, w, T, rows, lo, hi, out + t0 * os, os, scale);
}

/* A prefill's many tokens against one full panel, blocked as a GEMM: KB rows of the panel at a time are made fp32
 * once (bf16 and int8 converted into a buffer on the thread's stack, 64 KB: L2) and swept by every group of tokens, whose 64
 * sums each are carried in `out` from one block of rows to the next.  A lane is still sum + x_i * w_i, rounded
 * twice, row by row from zero (a partial sum stored and reloaded is the same float), then times the int8 scale:
 * the bits mv_block gives.  Converting per group (mv_groups) cost as much as the arithmetic at bf16. */
#define KB 256
#ifdef __AVX512F__
#define MM_GROUP 6 /* 24 accumulators, 4 weight vectors and a broadcast: the 32 registers, no spill */
__attribute__((always_inline))
static inline void mm_tile(const float *x, int64_t xs, const int NT, const float *wb, int k0, int k1, float *out,
                           int64_t os, int lo, int first) {
    __m512 a[4 * MM_GROUP];
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < 4; c++)
            a[4 * t + c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + t * os + lo + 16 * c);
    for (int i = k0; i < k1; i++) {
        const float *wr = wb + (int64_t)(i - k0) * 64;
        const __m512 w0 = _mm512_loadu_ps(wr), w1 = _mm512_loadu_ps(wr + 16);
        const __m512 w2 = _mm512_loadu_ps(wr + 32), w3 = _mm512_loadu_ps(wr + 48);
        for (int t = 0; t < NT; t++) {
            const __m512 xi = _mm512_set1_ps(x[t * xs + i]);
            a[4 * t] = _mm512_add_ps(a[4 * t], _mm512_mul_ps(xi, w0));
            a[4 * t + 1] = _mm512_add_ps(a[4 * t + 1], _mm512_mul_ps(xi, w1));
            a[4 * t + 2] = _mm512_add_ps(a[4 * t + 2], _mm512_mul_ps(xi, w2));
            a[4 * t + 3] = _mm512_add_ps(a[4 * t + 3], _mm512_mul_ps(xi, w3));
        }
    }
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(out + t * os + lo + 16 * c, a[4 * t + c]);
}
#else
#define MM_GROUP 3 /* 8-float vectors: 3 tokens x 4 vectors (half the panel) in the 16 registers with the weights */
__attribute__((always_inline))
static inline void mm_tile(const float *x, int64_t xs, const int NT, const float *wb, int k0, int k1, float *out,
                           int64_t os, int lo, int first) {
    for (int half = 0; half < 64; half += 32) {
        v8 a[4 * MM_GROUP];
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < 4; c++) a[4 * t + c] = first ? splat(0.0f) : load8(out + t * os + lo + half + 8 * c);
        for (int i = k0; i < k1; i++) {
            const float *wr = wb + (int64_t)(i - k0) * 64 + half;
            const v8 w0 = load8(wr), w1 = load8(wr + 8), w2 = load8(wr + 16), w3 = load8(wr + 24);
            for (int t = 0; t < NT; t++) {
                const v8 xi = splat(x[t * xs + i]);
                v8 p0 = xi * w0, p1 = xi * w1, p2 = xi * w2, p3 = xi * w3;
                a[4 * t] += p0, a[4 * t + 1] += p1, a[4 * t + 2] += p2, a[4 * t + 3] += p3;
            }
        }
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < 4; c++) store8(out + t * os + lo + half + 8 * c, a[4 * t + c]);
    }
}
#endif

static void mm_tiles(const float *x, int64_t xs, int nt, const float *wb, int k0, int k1, float *out, int64_t os,
                     int lo, int first) {
    switch (nt) {  /* NT a constant in each, so the accumulators stay in registers */
        case 1: mm_tile(x, xs, 1, wb, k0, k1, out, os, lo, first); break;
        case 2: mm_tile(x, xs, 2, wb, k0, k1, out, os, lo, first); break;
#if MM_GROUP > 3
        case 3: mm_tile(x, xs, 3, wb, k0, k1, out, os, lo, first); break;
        case 4: mm_tile(x, xs, 4, wb, k0, k1, out, os, lo, first); break;
        case 5: mm_tile(x, xs, 5, wb, k0, k1, out, os, lo, first); break;
#endif
        default: mm_tile(x, xs, MM_GROUP, wb, k0, k1, out, os, lo, first); break;
    }
}

static void mm_panel(const float *x, int64_t xs, int n, const void *w, int T, int rows, int lo, float *out,
                     int64_t os, const float *scale) {
    float buf[KB * 64] __attribute__((aligned(64)));  /* on the stack: a thread-local one cost 4% in __tls_get_addr */
    const int64_t base = (int64_t)lo * rows;
    for (int k0 = 0; k0 < rows; k0 += KB) {
        const int k1 = k0 + KB < rows ? k0 + KB : rows;
        const float *wb = (const float *)w + base + (int64_t)k0 * 64;
        if (T != 0) {
            const int64_t from = base + (int64_t)k0 * 64, count = (int64_t)(k1 - k0) * 64;
#ifdef __AVX512F__
            for (int64_t j = 0; j < count; j += 16) _mm512_store_ps(buf + j, wload16(w, from + j, T));
#else
            for (int64_t j = 0; j < count; j += 8) store8(buf + j, wload(w, from + j, T));
#endif
            wb = buf;
        }
        for (int t0 = 0; t0 < n; t0 += MM_GROUP) {
            const int nt = n - t0 < MM_GROUP ? n - t0 : MM_GROUP;
            mm_tiles(x + t0 * xs, xs, nt, wb, k0, k1, out + t0 * os, os, lo, k0 == 0);
        }
    }
    if (T == 2)
        for (int t = 0; t < n; t++)
            for (int c = 0; c < 64; c += 8) store8(out + t * os + lo + c, load8(out + t * os + lo + c) * load8(scale + lo + c));
}

/* x @ W's panel [lo, hi) for n tokens: a prefill's many as a blocked GEMM, a step's few streaming the panel once (up
 * to 16 tokens, groups of 8 from the panel in bf16 beat converting it: 12.6-13.4 ms a token against 15.5-16.9 at
 * Qwen2.5-Coder-0.5B's shape, 1 thread). */
static void mv_any(const float *x, int64_t xs, int n, const void *w, int T, int rows, int lo, int hi, float *out,
                   int64_t os, const float *scale) {
    if (n > 2 * MAXB && hi - lo == 64) mm_panel(x, xs, n, w, T, rows, lo, out, os, scale);
    else mv_groups(x, xs, n, w, T, rows, lo, hi, out, os, scale);
}

/* The columns are split into blocks of 64 (whole cache lines, eight vectors) between the threads;
 * x holds n rows `xs` floats apart, out n rows `os` apart. */
#define BLOCK 64
#define MATVEC(x, xs, n, w, rows, cols, out, os, scale)                                      \
    _Pragma("omp for schedule(static)")                                                    \
    for (int b = 0; b < ((cols) + BLOCK - 1) / BLOCK; b++) {                                \
        int lo = b * BLOCK, hi = lo + BLOCK < (cols) ? lo + BLOCK : (cols);                \
        mv_any((x), (xs), (n), (w), m->wtype, (rows), lo, hi, (out), (os), (scale));       \
    }

/* logits[t][r] = h[t] . w[r] for the rows r0..r1 of a [rows, cols] matrix in torch's layout (the
 * embedding, as a tied lm_head).  Eight rows at a time, their sums finished together (hsum8); token by
 * token, so one token alone gets the same bits as in a batch (the eight rows stay in L1 between tokens). */
__attribute__((optimize("fp-contract=fast"), always_inline))
static inline void rowdot_t(const float *h, int64_t hs, int n, const void *w, const int T, int cols, int r0, int r1,
                            float *out, int64_t os, const float *scale) {
    const int c8 = cols & ~7;
    int r = r0;
    for (; r + 8 <= r1; r += 8) {
        for (int t = 0; t < n; t++) {
            const float *ht = h + t * hs;
            v8 a[8];
            for (int k = 0; k < 8; k++) a[k] = splat(0.0f);
            for (int i = 0; i < c8; i += 8) {
                const v8 hv = load8(ht + i);
                for (int k = 0; k < 8; k++) a[k] += hv * wload(w, (int64_t)(r + k) * cols + i, T);
            }
            v8 sums = hsum8(a);
            for (int k = 0; k < 8; k++) {
                float sum = sums[k];
                for (int j = c8; j < cols; j++) sum += ht[j] * wget(w, (int64_t)(r + k) * cols + j, T);
                out[t * os + r + k] = T == 2 ? sum * scale[r + k] : sum;
            }
        }
    }
    for (; r < r1; r++)
        for (int t = 0; t < n; t++) {
            const float *ht = h + t * hs;
            v8 a = splat(0.0f);
            for (int i = 0; i < c8; i += 8) a += load8(ht + i) * wload(w, (int64_t)r * cols + i, T);
            float sum = hsum(a);
            for (int j = c8; j < cols; j++) sum += ht[j] * wget(w, (int64_t)r * cols + j, T);
            out[t * os + r] = T == 2 ? sum * scale[r] : sum;
        }
}

static void rowdot(const float *h, int64_t hs, int n, const void *w, int T, int cols, int r0, int r1, float *out,
                   int64_t os, const float *scale) {
    if (n == 1) {  /* every decode step: the accumulator in a register */
        if (T == 1) rowdot_t(h, hs, 1, w, 1, cols, r0, r1, out, os, scale);
        else if (T == 2) rowdot_t(h, hs, 1, w, 2, cols, r0, r1, out, os, scale);
        else rowdot_t(h, hs, 1, w, 0, cols, r0, r1, out, os, scale);
    } else if (T == 1) rowdot_t(h, hs, n, w, 1, cols, r0, r1, out, os, scale);
    else if (T == 2) rowdot_t(h, hs, n, w, 2, cols, r0, r1, out, os, scale);
    else rowdot_t(h, hs, n, w, 0, cols, r0, r1, out, os, scale);
}

#define LM_ROWS 64
#define LM_HEAD(h, n, logits)                                                                          \
    _Pragma("omp for schedule(static)")                                                              \
    for (int b = 0; b < (m->vocab + LM_ROWS - 1) / LM_ROWS; b++) {                                    \
        const int r0 = b * LM_ROWS, r1 = r0 + LM_ROWS < m->vocab ? r0 + LM_ROWS : m->vocab;          \
        rowdot((h), m->hidden, (n), m->lm_head, m->wtype, m->hidden, r0, r1, (logits), m->vocab,    \
               m->lm_head_scale);                                                                    \
    }

/* The embedding row of `token` as fp32. */
static void embed_row(const Model *m, int32_t token, float *out) {
    const int64_t base = (int64_t)token * m->hidden;
    const float sc = m->wtype == 2 ? m->embed_scale[token] : 1.0f;
    for (int i = 0; i < m->hidden; i++) out[i] = wget(m->embed, base + i, m->wtype) * sc;
}

/* Logits of n rows of final-normed hidden states (the torch prefill's last position). */
void tabd_lm_head(const Model *m, const float *h, int32_t n, float *logits, int32_t threads) {
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
    LM_HEAD(h, n, logits)
}

