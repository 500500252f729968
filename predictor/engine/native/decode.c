/* Decode steps of a Llama-shaped model on the CPU, up to MAXB tokens per call (a prefill's pieces up to MAXP),
 * with no Python in between.
 *
 * The torch engine prefills long chunks (MKL GEMMs and flash attention); the torch-free runner prefills here, in
 * pieces of MAXP whose matrix products are blocked as GEMMs (matvec.h's mm_panel); and this file
 * runs the short steps that follow (a decoded token, a keystroke's few tokens, a
 * token and its prompt-lookup drafts), over the same weights and the same KV
 * cache tensors, reading them in place through their data pointers.  Per call it
 * streams every weight matrix once for all its tokens (fp32, bf16 or int8 with
 * per-column scales, summed in fp32; x @ W with W stored [in, out], so each output
 * lane accumulates independently and the loops vectorise without reordering a
 * sum) and reads each layer's keys and values once per token.
 *
 * One OpenMP team does the whole step: `omp for` splits the matrix columns and
 * the KV heads between the threads; the small row operations run on one thread
 * between barriers.  Built by predictor/engine/native.py with -O3 -march=native
 * -fopenmp -ffp-contract=off (no fused multiply-add where torch rounds twice).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#define MAXB 8 /* tokens per call at most: a keystroke's few, or a token and its prompt-lookup drafts */
/* tokens per prefill call at most (tabd_prefill_n): each weight panel is read from memory once for all of them and
 * swept from L2 for every group of MAXB.  With MAXB a call, a prompt streamed all the weights from DRAM every 8 tokens:
 * at Qwen2.5-Coder-0.5B's shape (bf16, 1 thread) that was most of a prefill's time. */
#define MAXP 64

/* Weight formats (wtype) of the matrices and the embedding: 0 fp32, 1 bf16 (the top half of an fp32),
 * 2 int8 with one fp32 scale per output column (per vocabulary row for the embedding). Sums are fp32. */
typedef struct {
    int32_t layers, hidden, heads, kv_heads, head_dim, inter, vocab, capacity, max_pos;
    float eps, scale;
    int32_t wtype;
    const void *embed;         /* [vocab, hidden] rows */
    const float *embed_scale;  /* int8: [vocab] */
    const float *final_norm;   /* [hidden] */
    const void *lm_head;       /* [vocab, hidden] rows (torch's layout; the embedding itself when tied) */
    const float *lm_head_scale;
    const void *lm_panels;     /* or NULL: the lm_head as [hidden, vocab] in 64-column panels, same format (small models) */
    const float *cos, *sin;    /* [max_pos, head_dim] */
    const float **attn_norm;   /* per layer [hidden] */
    const void **qkv;          /* per layer [hidden, (heads + 2 kv_heads) head_dim], in 64-column panels */
    const float **qkv_scale;   /* int8: per layer [(heads + 2 kv_heads) head_dim] */
    const float **qkv_bias;    /* per layer [(heads + 2 kv_heads) head_dim], or NULL pointers */
    const void **o;            /* per layer [heads head_dim, hidden] */
    const float **o_scale;
    const float **mlp_norm;    /* per layer [hidden] */
    const void **gate_up;      /* per layer [hidden, 2 inter] */
    const float **gate_up_scale;
    const void **down;         /* per layer [inter, hidden] */
    const float **down_scale;
} Model;

/* Scratch floats a call of up to MAXP tokens needs; the caller allocates them once. */
int64_t tabd_scratch_floats(const Model *m) {
    int64_t qkv = (int64_t)(m->heads + 2 * m->kv_heads) * m->head_dim;
    return MAXP * (2 * (int64_t)m->hidden + qkv + (int64_t)m->heads * m->head_dim + 2 * (int64_t)m->inter) +
           (int64_t)m->heads * m->max_pos + 8;
}

int32_t tabd_max_batch(void) { return MAXB; }
int32_t tabd_max_prefill(void) { return MAXP; }

/* Eight floats in one vector register (AVX on x86-64, two NEON registers on arm64). */
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));

static inline v8 load8(const float *p) { v8 r; memcpy(&r, p, sizeof r); return r; }
static inline void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }
static inline v8 splat(float f) { return (v8){f, f, f, f, f, f, f, f}; }
static inline float hsum(v8 v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

#include "matvec.h" /* the weight formats, the panel matrix-vector products and the row dot products */

static void rmsnorm(const float *x, const float *w, int n, float eps, float *out) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * r);
}

/* transformers' rotate_half: x * cos + cat(-x2, x1) * sin */
static void rope(float *x, const float *cos, const float *sin, int d) {
    const int half = d / 2;
    float tmp[512];
    for (int i = 0; i < half; i++) {
        tmp[i] = x[i] * cos[i] + (-x[i + half]) * sin[i];
        tmp[i + half] = x[i + half] * cos[i + half] + x[i] * sin[i + half];
    }
    memcpy(x, tmp, sizeof(float) * d);
}

/* exp of eight floats at x <= 0 (softmax after the max is subtracted): Cephes' polynomial on
 * [-ln2/2, ln2/2] and 2^n built in the exponent bits; relative error about 2e-7; below -87, 0. */
static inline v8 exp8(v8 x) {
    const v8 lo = splat(-87.0f);
    const i8 under = x < lo;
    x = (v8)(((i8)x & ~under) | ((i8)lo & under));
    v8 n = x * splat(1.44269504088896341f);
    n = __builtin_convertvector(__builtin_convertvector(n + (v8)((i8)splat(0.5f) | ((i8)n & (i8)splat(-0.0f))), i8), v8);
    /* n rounded half away from zero */
    v8 r = x - n * splat(0.693359375f);
    r = r - n * splat(-2.12194440e-4f);
    v8 p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * r * r + r + splat(1.0f);
    const i8 bits = (__builtin_convertvector(n, i8) + 127) << 23;
    return (v8)((i8)(p * (v8)bits) & ~under);
}

/* sum of exp(x[j] - top) over n floats (top their maximum): the softmax's denominator, so the argmax's
 * probability is its inverse.  Done here, not by torch after the call: a logsumexp per decoded token was
 * 10% of the embedded model's keystroke (dispatch, and a second pass over the logits from Python). */
static float sum_exp(const float *x, int n, float top) {
    v8 acc = splat(0.0f);
    int j = 0;
    for (; j + 8 <= n; j += 8) acc += exp8(load8(x + j) - splat(top));
    float sum = hsum(acc);
    for (; j < n; j++) sum += expf(x[j] - top);
    return sum;
}

/* The first index of the largest of n floats, NaNs passed over unless x[0] is one (then 0): the scalar
 * loop `if (x[j] > top)` exactly.  The maximum is found 64 lanes at a time and then its first index: the
 * scalar loop, one compare a step on a chain through `top`, cost about 10 us a row over a vocabulary of 8k (2%
 * of the embedded model's step, once per token of a verify pass). */
static int32_t argmax(const float *x, int n) {
    int j = 1;
    float top = x[0];
#ifdef __AVX512F__
    if (n >= 64 && top == top) {
        __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
        for (j = 0; j + 64 <= n; j += 64) {  /* max(x, m): a NaN in x leaves m */
            m0 = _mm512_max_ps(_mm512_loadu_ps(x + j), m0);
            m1 = _mm512_max_ps(_mm512_loadu_ps(x + j + 16), m1);
            m2 = _mm512_max_ps(_mm512_loadu_ps(x + j + 32), m2);
            m3 = _mm512_max_ps(_mm512_loadu_ps(x + j + 48), m3);
        }
        float v = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
        for (; j < n; j++) v = x[j] > v ? x[j] : v;
        top = v > top ? v : top;
        const __m512 tv = _mm512_set1_ps(top);
        for (j = 0; j + 16 <= n; j += 16) {
            const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j), tv, _CMP_EQ_OQ);
            if (eq) return j + __builtin_ctz(eq);
        }
        for (; j < n; j++)
            if (x[j] == top) return j;
        return 0;
    }
#endif
    int32_t top_i = 0;
    for (; j < n; j++)
        if (x[j] > top) top = x[j], top_i = j;
    return top_i;
}

/* One query head over `len` cached positions: softmax(q k^T * scale) v, as torch computes it
 * (scores, max, exp, sum, divide, weighted sum of values); `s` holds `len` floats of scratch. */
static void attend(const float *q, const float *k, const float *v, int len, int d, float scale, float *s,
                   float *out) {
    float m = -INFINITY;
    if (d == 32) {
        const v8 q0 = load8(q) * splat(scale), q1 = load8(q + 8) * splat(scale);
        const v8 q2 = load8(q + 16) * splat(scale), q3 = load8(q + 24) * splat(scale);
        for (int t = 0; t < len; t++) {
            const float *kt = k + (int64_t)t * 32;
            s[t] = hsum((q0 * load8(kt) + q1 * load8(kt + 8)) + (q2 * load8(kt + 16) + q3 * load8(kt + 24)));
        }
    } else {
        for (int t = 0; t < len; t++) {
            const float *kt = k + (int64_t)t * d;
            float dot = 0.0f;
            for (int i = 0; i < d; i++) dot += (q[i] * scale) * kt[i];
            s[t] = dot;
        }
    }
    for (int t = 0; t < len; t++) m = s[t] > m ? s[t] : m;
    v8 total = splat(0.0f);
    int t = 0;
    for (; t + 8 <= len; t += 8) {
        const v8 e = exp8(load8(s + t) - splat(m));
        store8(s + t, e);
        total += e;
    }
    float sum = hsum(total);
    for (; t < len; t++) {
        float e[8] = {s[t] - m};
        const v8 ev = exp8(load8(e));
        s[t] = ev[0];
        sum += ev[0];
    }
    const float inv = 1.0f / sum;
    if (d % 8 == 0 && d <= 64) {
        v8 acc[8];
        const int nv = d / 8;
        for (int i = 0; i < nv; i++) acc[i] = splat(0.0f);
        for (int u = 0; u < len; u++) {
            const v8 p = splat(s[u] * inv);
            const float *vt = v + (int64_t)u * d;
            for (int i = 0; i < nv; i++) acc[i] += p * load8(vt + 8 * i);
        }
        for (int i = 0; i < nv; i++) store8(out + 8 * i, acc[i]);
        return;
    }
    for (int i = 0; i < d; i++) out[i] = 0.0f;
    for (int u = 0; u < len; u++) {
        const float p = s[u] * inv;
        const float *vt = v + (int64_t)u * d;
        for (int i = 0; i < d; i++) out[i] += p * vt[i];
    }
}

static inline float max_of(const float *s, int len) {
    float m = -INFINITY;
    int t = 0;
#ifdef __AVX__
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (; t + 8 <= len; t += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + t));
    for (int i = 0; i < 8; i++) m = mv[i] > m ? mv[i] : m;
#endif
    for (; t < len; t++) m = s[t] > m ? s[t] : m;
    return m;
}

#define AHEAD 4 /* blocks of 8 keys */

/* The query heads of one KV head (grouped-query attention), head_dim D a multiple of 8 up to 128,
 * inlined per D so the loops over its vectors unroll.  Keys and values come from L3 (a layer's are
 * larger than L2 at long context), so each is read from there once for the whole group: the loops
 * run over blocks of keys, and inside a block (hot in L1) over the heads.  `s` holds group * len
 * floats of scratch; group <= 64 and group * D <= GROUP_FLOATS. */
#define GROUP_FLOATS 8192
__attribute__((optimize("fp-contract=fast"), always_inline))
static inline void attend_group(const float *q, int group, const float *k, const float *v, int len, const int D,
                                float scale, float *s, float *out) {
    const int NC = D / 8;
    float inv[64], qs[GROUP_FLOATS], acc[GROUP_FLOATS];
    for (int i = 0; i < group * D; i++) qs[i] = q[i] * scale, acc[i] = 0.0f;
    int t = 0;
    for (; t + 8 <= len; t += 8) {
        const float *kb = k + (int64_t)t * D;
        if (t + 8 * AHEAD < len)  /* the keys a few blocks on: the hardware prefetcher alone falls behind here */
            for (int line = 0; line < D / 2; line++) __builtin_prefetch(kb + 8 * D * AHEAD + 16 * line);
        for (int g = 0; g < group; g++) {
            const float *qg = qs + g * D;
            v8 r[8];
            for (int u = 0; u < 8; u++) {
                const float *kt = kb + u * D;
                v8 even = load8(qg) * load8(kt), odd = splat(0.0f);
                for (int c = 1; c < NC; c++) {
                    if (c & 1) odd += load8(qg + 8 * c) * load8(kt + 8 * c);
                    else even += load8(qg + 8 * c) * load8(kt + 8 * c);
                }
                r[u] = even + odd;
            }
            store8(s + (int64_t)g * len + t, hsum8(r));
        }
    }
    for (; t < len; t++) {
        const float *kt = k + (int64_t)t * D;
        for (int g = 0; g < group; g++) {
            const float *qg = qs + g * D;
            v8 r = splat(0.0f);
            for (int c = 0; c < NC; c++) r += load8(qg + 8 * c) * load8(kt + 8 * c);
            s[(int64_t)g * len + t] = hsum(r);
        }
    }
    for (int g = 0; g < group; g++) {  /* softmax numerators in place; 1 / denominator aside */
        float *sg = s + (int64_t)g * len;
        const float m = max_of(sg, len);
        v8 total = splat(0.0f);
        for (t = 0; t + 8 <= len; t += 8) {
            const v8 e = exp8(load8(sg + t) - splat(m));
            store8(sg + t, e);
            total += e;
        }
        float sum = hsum(total);
        for (; t < len; t++) {
            float e[8] = {sg[t] - m};
            sg[t] = exp8(load8(e))[0];
            sum += sg[t];
        }
        inv[g] = 1.0f / sum;
    }
    for (int t0 = 0; t0 < len; t0 += 32) {  /* 32 value rows per block */
        const int t1 = t0 + 32 < len ? t0 + 32 : len;
        if (t1 + 32 <= len)
            for (int line = 0; line < 2 * D; line++) __builtin_prefetch(v + (int64_t)(t1 + 32) * D + 16 * line);
        for (int g = 0; g < group; g++) {
            const float *sg = s + (int64_t)g * len;
            float *ag = acc + g * D;
            v8 a[16], b[16];
            for (int c = 0; c < NC; c++) a[c] = load8(ag + 8 * c), b[c] = splat(0.0f);
            int u = t0;
            for (; u + 2 <= t1; u += 2) {  /* two rows at a time: independent sums */
                const float *v0 = v + (int64_t)u * D, *v1 = v0 + D;
                const v8 p = splat(sg[u]), r = splat(sg[u + 1]);
                for (int c = 0; c < NC; c++) a[c] += p * load8(v0 + 8 * c), b[c] += r * load8(v1 + 8 * c);
            }
            if (u < t1) {
                const float *v0 = v + (int64_t)u * D;
                const v8 p = splat(sg[u]);
                for (int c = 0; c < NC; c++) a[c] += p * load8(v0 + 8 * c);
            }
            for (int c = 0; c < NC; c++) store8(ag + 8 * c, a[c] + b[c]);
        }
    }
    for (int g = 0; g < group; g++) {
        const v8 i = splat(inv[g]);
        for (int c = 0; c < NC; c++) store8(out + g * D + 8 * c, load8(acc + g * D + 8 * c) * i);
    }
}

static void attend_group32(const float *q, int group, const float *k, const float *v, int len, float scale,
                           float *s, float *out) {
    attend_group(q, group, k, v, len, 32, scale, s, out);
}

static void attend_group64(const float *q, int group, const float *k, const float *v, int len, float scale,
                           float *s, float *out) {
    attend_group(q, group, k, v, len, 64, scale, s, out);
}

static void attend_group128(const float *q, int group, const float *k, const float *v, int len, float scale,
                            float *s, float *out) {
    attend_group(q, group, k, v, len, 128, scale, s, out);
}

/* Feeds `n` <= MAXB tokens (MAXP where last_only) at positions pos .. pos + n - 1 (the cache holds positions [0, pos)), writes
 * their keys and values into kcache/vcache ([layers, kv_heads, capacity, head_dim]), the next-token
 * logits after each into logits[n][vocab], their argmax into best[n] and, when prob is not NULL, the softmax
 * probability of that argmax into prob[n]; 0, or -1 when the arguments are out of range.  Token t attends to
 * positions [0, pos + t]: the same numbers as n calls of one token. */
static int32_t forward_n(const Model *m, float *kcache, float *vcache, int32_t pos, const int32_t *tokens, int32_t n,
                         float *logits, int32_t *best, float *prob, float *scratch, int32_t threads, int last_only) {
    if (n < 1 || n > (last_only ? MAXP : MAXB) || pos < 0 || pos + n > m->capacity || pos + n > m->max_pos || m->head_dim > 512) return -1;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= m->vocab) return -1;
    const int H = m->hidden, D = m->head_dim, NQ = m->heads * D, NKV = m->kv_heads * D, I = m->inter;
    const int NQKV = NQ + 2 * NKV, group = m->heads / m->kv_heads;
    float *x = scratch, *h = x + MAXP * H, *qkv = h + MAXP * H, *attn = qkv + MAXP * NQKV, *gu = attn + MAXP * NQ;
    float *scores = gu + MAXP * 2 * I;
    const int64_t layer_stride = (int64_t)m->kv_heads * m->capacity * D;
    /* a KV head's whole query group in one pass over its keys, when there are enough KV heads for the threads */
    const int nthreads = threads > 0 ? threads : 1;
    const int by_group = (D == 32 || D == 64 || D == 128) && group <= 64 && group * D <= GROUP_FLOATS &&
                         m->kv_heads >= nthreads;

#pragma omp parallel num_threads(nthreads)
    {
#pragma omp single
        for (int t = 0; t < n; t++) embed_row(m, tokens[t], x + t * H);
        for (int l = 0; l < m->layers; l++) {
#pragma omp single
            for (int t = 0; t < n; t++) rmsnorm(x + t * H, m->attn_norm[l], H, m->eps, h + t * H);
            MATVEC(h, H, n, m->qkv[l], H, NQKV, qkv, NQKV, m->qkv_scale[l])
#pragma omp single
            {
                float *kl = kcache + l * layer_stride, *vl = vcache + l * layer_stride;
                for (int t = 0; t < n; t++) {
                    float *q = qkv + t * NQKV;
                    const float *cos = m->cos + (int64_t)(pos + t) * D, *sin = m->sin + (int64_t)(pos + t) * D;
                    if (m->qkv_bias[l])
                        for (int j = 0; j < NQKV; j++) q[j] += m->qkv_bias[l][j];
                    for (int hd = 0; hd < m->heads + m->kv_heads; hd++) rope(q + hd * D, cos, sin, D);
                    for (int g = 0; g < m->kv_heads; g++) {
                        memcpy(kl + ((int64_t)g * m->capacity + pos + t) * D, q + NQ + g * D, sizeof(float) * D);
                        memcpy(vl + ((int64_t)g * m->capacity + pos + t) * D, q + NQ + NKV + g * D, sizeof(float) * D);
                    }
                }
            }
            if (by_group) {
#pragma omp for schedule(static)
                for (int g = 0; g < m->kv_heads; g++) {
                    const float *kl = kcache + l * layer_stride + (int64_t)g * m->capacity * D;
                    const float *vl = vcache + l * layer_stride + (int64_t)g * m->capacity * D;
                    float *sg = scores + (int64_t)g * group * m->max_pos;
                    for (int t = 0; t < n; t++) {
                        const float *qg = qkv + t * NQKV + g * group * D;
                        float *og = attn + t * NQ + g * group * D;
                        const int len = pos + t + 1;
                        if (D == 32) attend_group32(qg, group, kl, vl, len, m->scale, sg, og);
                        else if (D == 64) attend_group64(qg, group, kl, vl, len, m->scale, sg, og);
                        else attend_group128(qg, group, kl, vl, len, m->scale, sg, og);
                    }
                }
            } else {
#pragma omp for schedule(static)
                for (int hd = 0; hd < m->heads; hd++) {
                    const int g = hd / group;
                    const float *kl = kcache + l * layer_stride + (int64_t)g * m->capacity * D;
                    const float *vl = vcache + l * layer_stride + (int64_t)g * m->capacity * D;
                    float *sh = scores + (int64_t)hd * m->max_pos;
                    for (int t = 0; t < n; t++) {
                        const float *qh = qkv + t * NQKV + hd * D;
                        float *oh = attn + t * NQ + hd * D;
                        const int len = pos + t + 1;
                        if (D == 32) attend_group32(qh, 1, kl, vl, len, m->scale, sh, oh);  /* a group of one */
                        else if (D == 64) attend_group64(qh, 1, kl, vl, len, m->scale, sh, oh);
                        else if (D == 128) attend_group128(qh, 1, kl, vl, len, m->scale, sh, oh);
                        else attend(qh, kl, vl, len, D, m->scale, sh, oh);
                    }
                }
            }
            MATVEC(attn, NQ, n, m->o[l], NQ, H, h, H, m->o_scale[l])
#pragma omp single
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < H; i++) x[t * H + i] += h[t * H + i];
                rmsnorm(x + t * H, m->mlp_norm[l], H, m->eps, h + t * H);
            }
            MATVEC(h, H, n, m->gate_up[l], H, 2 * I, gu, 2 * I, m->gate_up_scale[l])
            /* no division per element: at 0.5B that cost a millisecond a step; one loop (one barrier) for all tokens */
#pragma omp for schedule(static) collapse(2)
            for (int t = 0; t < n; t++)
                for (int i = 0; i < I; i++) {
                    float *row = gu + (int64_t)t * 2 * I;
                    const float g = row[i];
                    row[i] = (g / (1.0f + expf(-g))) * row[I + i];
                }
            MATVEC(gu, 2 * I, n, m->down[l], I, H, h, H, m->down_scale[l])
#pragma omp single
            for (int k = 0; k < n * H; k++) x[k] += h[k];
        }
        /* last_only (a prefill): the logits of the last token alone; rows are computed independently, so
         * they are the same bits as in a full call */
        const int first = last_only ? n - 1 : 0, nr = n - first;
        float *hl = h + (int64_t)first * H;
#pragma omp single
        for (int t = 0; t < nr; t++) rmsnorm(x + (int64_t)(first + t) * H, m->final_norm, H, m->eps, hl + t * H);
        if (m->lm_panels) {
            MATVEC(hl, H, nr, m->lm_panels, H, m->vocab, logits, m->vocab, m->lm_head_scale)
        } else {
            LM_HEAD(hl, nr, logits)
        }
#pragma omp single
        for (int t = 0; t < nr; t++) {
            const float *lg = logits + (int64_t)t * m->vocab;
            const int32_t top_i = argmax(lg, m->vocab);
            best[t] = top_i;
            if (prob) prob[t] = 1.0f / sum_exp(lg, m->vocab, lg[top_i]);
        }
    }
    return 0;
}

int32_t tabd_decode_n(const Model *m, float *kcache, float *vcache, int32_t pos, const int32_t *tokens, int32_t n,
                      float *logits, int32_t *best, float *prob, float *scratch, int32_t threads) {
    return forward_n(m, kcache, vcache, pos, tokens, n, logits, best, prob, scratch, threads, 0);
}

/* A prefill's piece: like tabd_decode_n, but only the last token's logits (into logits[0]), argmax (best[0])
 * and probability: the lm_head is most of a small model's work per token, and a prompt needs it once. */
int32_t tabd_prefill_n(const Model *m, float *kcache, float *vcache, int32_t pos, const int32_t *tokens, int32_t n,
                       float *logits, int32_t *best, float *prob, float *scratch, int32_t threads) {
    return forward_n(m, kcache, vcache, pos, tokens, n, logits, best, prob, scratch, threads, 1);
}

/* One token: the argmax of the logits after it (its probability into *prob when not NULL), or -1 when the
 * arguments are out of range. */
int32_t tabd_decode(const Model *m, float *kcache, float *vcache, int32_t pos, int32_t token, float *logits,
                    float *prob, float *scratch, int32_t threads) {
    int32_t best = -1;
    if (tabd_decode_n(m, kcache, vcache, pos, &token, 1, logits, &best, prob, scratch, threads) != 0) return -1;
    return best;
}

#include "gemm.h" /* the torch engine's prefill: its GEMMs over the same panels, SwiGLU, q/k/v with rotary */
