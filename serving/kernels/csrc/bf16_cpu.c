/* The packed rows loop's bf16 kernels: attention on AMX tiles (one pass over the report's keys and the row's own
   keys), RMSNorm and rotary in one pass each.

   Built at first use by serving/kernels/bf16_cpu.py (a C compiler and an AMX CPU needed; otherwise the
   Python side keeps torch's flash kernel). Why: torch's CPU flash kernel spends most of its bf16 time on
   the softmax's exponentials (about 2.3 G/s on two cores), not the matrix units. Here the exponential is
   a short polynomial on AVX-512 and both products run on AMX tiles.

   Layouts (bf16 as uint16):
   q    query token i, head hh, dim c at q[i * q_stride + hh * d + c]
   keys packed per kv head for AMX's B operand of Q·Kᵀ by ls_pack_k: [kvh][n_pad / 16][d / 32][16 pairs][16 keys][2]
   values packed for P·V by ls_pack_v: [kvh][n_pad / 32][d / 16][16 key pairs][16 dims][2]
   out  out[i * h * d + hh * d + c]
   Two key sets, each packed and padded to a multiple of BK: the `past` keys, seen by every query, and the
   rows' own keys, own key j seen by query i iff row_start[i] <= j <= i. The past is packed apart so that
   the rubric rows' batches of one report reuse one packed copy.
   One work item is BQ query tokens of one head; items are independent and run in OpenMP threads, so the
   result does not depend on the number of threads. */

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BQ 32
#define BK 128 /* keys a block: the per-row softmax bookkeeping is paid once per BK keys */
#define NV (BK / 16) /* the trees below are written for NV = 8 */
#define MAXD 256

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* Linux hands AMX state to a process only on request (0 = granted or already granted). */
int ls_amx_request(void) { return (int)syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18); }

/* The OpenMP team size, torch's (set by the caller before each call: torch's count is per process, OpenMP's
   default per thread, and a caller on another thread would otherwise get OpenMP's default). */
static int threads = 1;

void ls_threads(int n) { threads = n > 0 ? n : 1; }

/* 2^x for x <= 0, exactly 0 below -126 (so a masked key, -inf, adds exactly nothing): x = n + f, 2^f by a
   degree-5 polynomial (relative error under 1e-7). */
static inline __m512 exp2_neg(__m512 x) {
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.8775767e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(8.9893397e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5826318e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4015361e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9315308e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.9999994e-1f));
    return _mm512_maskz_scalef_ps(keep, p, n);
}

/* Which keys of 16 query i sees: past keys below `past`, or own keys j (j0 = the first's own index) with
   start <= j <= i. own = 0 for a block of past keys. */
static inline __mmask16 seen(int own, int64_t j0, int64_t past, int64_t start, int64_t i) {
    __m512i j = _mm512_add_epi32(_mm512_set1_epi32((int)j0),
                                 _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    if (!own) return _mm512_cmplt_epi32_mask(j, _mm512_set1_epi32((int)past));
    return _mm512_cmpge_epi32_mask(j, _mm512_set1_epi32((int)start)) &
           _mm512_cmple_epi32_mask(j, _mm512_set1_epi32((int)i));
}

/* Balanced trees: a chain of eight dependent max or add ops per row would make the softmax latency-bound. */
static inline __m512 max8(const __m512 *x) {
    return _mm512_max_ps(_mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3])),
                         _mm512_max_ps(_mm512_max_ps(x[4], x[5]), _mm512_max_ps(x[6], x[7])));
}

static inline __m512 add8(const __m512 *x) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(x[0], x[1]), _mm512_add_ps(x[2], x[3])),
                         _mm512_add_ps(_mm512_add_ps(x[4], x[5]), _mm512_add_ps(x[6], x[7])));
}

/* Online softmax of one BQ x BK block of raw scores in s, written as bf16 to p: first every row's new max
   (masked keys set to -inf in s), then the exponentials, then the running sums and the rescaled rows of o. */
static void softmax_block(float *s, uint16_t *p, float *m, float *l, float *o, int d, int own, int64_t j0,
                          int64_t past, const int32_t *row_start, int64_t i0, int nq, int masked, float scale2) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale2);
    float mn[BQ] __attribute__((aligned(64))), alpha[BQ] __attribute__((aligned(64)));
    float sum[BQ];
    for (int r = 0; r < BQ; r++) {
        __m512 x[NV];
        for (int j = 0; j < NV; j++) x[j] = _mm512_load_ps(s + r * BK + 16 * j);
        if (masked) {
            int64_t i = i0 + (r < nq ? r : nq - 1);
            for (int j = 0; j < NV; j++) {
                x[j] = _mm512_mask_mov_ps(ninf, seen(own, j0 + 16 * j, past, row_start[i], i), x[j]);
                _mm512_store_ps(s + r * BK + 16 * j, x[j]);
            }
        }
        float hi = _mm512_reduce_max_ps(max8(x)) * scale2;
        mn[r] = hi > m[r] ? hi : m[r];
    }
    for (int r = 0; r < BQ; r += 16) {
        __m512 old = _mm512_load_ps(m + r), now = _mm512_load_ps(mn + r);
        /* alpha = 2^(old - new), 0 where nothing was seen before; a row with nothing seen yet keeps 1 */
        __m512 a = exp2_neg(_mm512_sub_ps(old, now));
        a = _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(old, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
        a = _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(now, ninf, _CMP_EQ_OQ), _mm512_set1_ps(1.0f));
        _mm512_store_ps(alpha + r, a);
    }
    for (int r = 0; r < BQ; r++) {
        if (mn[r] == -INFINITY) { /* nothing seen yet: this block adds nothing */
            memset(p + r * BK, 0, BK * sizeof(uint16_t));
            sum[r] = 0.0f;
            continue;
        }
        __m512 x[NV], vm = _mm512_set1_ps(mn[r]);
        for (int j = 0; j < NV; j++) x[j] = exp2_neg(_mm512_fmsub_ps(_mm512_load_ps(s + r * BK + 16 * j), sc, vm));
        for (int j = 0; j < NV; j += 2)
            _mm512_store_si512(p + r * BK + 16 * j, (__m512i)_mm512_cvtne2ps_pbh(x[j + 1], x[j]));
        sum[r] = _mm512_reduce_add_ps(add8(x));
    }
    for (int r = 0; r < BQ; r++) {
        l[r] = l[r] * alpha[r] + sum[r];
        m[r] = mn[r];
        if (alpha[r] != 1.0f) {
            __m512 va = _mm512_set1_ps(alpha[r]);
            for (int c = 0; c < d; c += 16)
                _mm512_store_ps(o + r * d + c, _mm512_mul_ps(_mm512_load_ps(o + r * d + c), va));
        }
    }
}

typedef struct {
    const uint16_t *q, *kpast, *vpast, *kown, *vown;
    const int32_t *row_start;
    uint16_t *out;
    int64_t q_stride, past, past_pad, own_pad, t;
    int h, kvh, d;
    float scale2;
} job;

/* S = Q·Kᵀ for BQ queries and the BK keys at kh (a packed block), into s (BQ x BK fp32). */
static void scores(const uint16_t *qb, const uint16_t *kh, float *s, int d) {
    int steps = d / 32;
    for (int sb = 0; sb < BK; sb += 32) {
        const uint16_t *kb = kh + (int64_t)(sb / 16) * steps * 512;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int st = 0; st < steps; st++) {
            _tile_loadd(4, qb + st * 32, d * 2);
            _tile_loadd(5, qb + 16 * d + st * 32, d * 2);
            _tile_loadd(6, kb + st * 512, 64);
            _tile_loadd(7, kb + (steps + st) * 512, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, s + sb, BK * 4);
        _tile_stored(1, s + sb + 16, BK * 4);
        _tile_stored(2, s + 16 * BK + sb, BK * 4);
        _tile_stored(3, s + 16 * BK + sb + 16, BK * 4);
    }
}

/* o (BQ x d fp32) += P·V for the bf16 weights pb (BQ x BK) and the BK values at vh (a packed block). */
static void weigh(const uint16_t *pb, const uint16_t *vh, float *o, int d) {
    int cols = d / 16;
    for (int c = 0; c < cols; c++) {
        _tile_loadd(0, o + c * 16, d * 4);
        _tile_loadd(1, o + 16 * d + c * 16, d * 4);
        for (int sb = 0; sb < BK; sb += 32) {
            _tile_loadd(4, pb + sb, BK * 2);
            _tile_loadd(5, pb + 16 * BK + sb, BK * 2);
            _tile_loadd(6, vh + ((int64_t)(sb / 32) * cols + c) * 512, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 5, 6);
        }
        _tile_stored(0, o + c * 16, d * 4);
        _tile_stored(1, o + 16 * d + c * 16, d * 4);
    }
}

/* One work item: BQ query tokens from i0 of head hh, over the past's blocks and then the own blocks that
   some query of the item sees (the rest are skipped, not masked). */
static void item(const job *jb, int hh, int64_t i0) {
    int d = jb->d, nq = (int)(jb->t - i0 < BQ ? jb->t - i0 : BQ), kv = hh / (jb->h / jb->kvh);
    uint16_t qb[BQ * MAXD] __attribute__((aligned(64)));
    uint16_t pb[BQ * BK] __attribute__((aligned(64)));
    float s[BQ * BK] __attribute__((aligned(64)));
    float o[BQ * MAXD] __attribute__((aligned(64)));
    float m[BQ] __attribute__((aligned(64))), l[BQ];
    for (int r = 0; r < BQ; r++) {
        if (r < nq) memcpy(qb + r * d, jb->q + (i0 + r) * jb->q_stride + (int64_t)hh * d, d * sizeof(uint16_t));
        else memset(qb + r * d, 0, d * sizeof(uint16_t));
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    memset(o, 0, sizeof(float) * BQ * d);
    const int32_t *rs = jb->row_start;
    int64_t last = i0 + nq - 1;
    for (int64_t k0 = 0; k0 < jb->past_pad; k0 += BK) {
        const uint16_t *kh = jb->kpast + ((int64_t)kv * jb->past_pad + k0) * d;
        scores(qb, kh, s, d);
        softmax_block(s, pb, m, l, o, d, 0, k0, jb->past, rs, i0, nq, k0 + BK > jb->past, jb->scale2);
        weigh(pb, jb->vpast + ((int64_t)kv * jb->past_pad + k0) * d, o, d);
    }
    for (int64_t j0 = rs[i0] / BK * BK; j0 <= last; j0 += BK) {
        const uint16_t *kh = jb->kown + ((int64_t)kv * jb->own_pad + j0) * d;
        scores(qb, kh, s, d);
        int masked = j0 < rs[last] || j0 + BK - 1 > i0;
        softmax_block(s, pb, m, l, o, d, 1, j0, jb->past, rs, i0, nq, masked, jb->scale2);
        weigh(pb, jb->vown + ((int64_t)kv * jb->own_pad + j0) * d, o, d);
    }
    for (int r = 0; r < nq; r++) {
        __m512 inv = _mm512_set1_ps(1.0f / l[r]);
        uint16_t *dst = jb->out + (i0 + r) * (int64_t)jb->h * d + (int64_t)hh * d;
        for (int c = 0; c < d; c += 16)
            _mm256_storeu_si256((__m256i *)(dst + c),
                                (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_load_ps(o + r * d + c), inv)));
    }
}

/* Attention of t query tokens and h heads, in h x ceil(t / BQ) work items (item w: head w / ceil(t / BQ),
   its query block w % ceil(t / BQ)). `past` keys packed in kpast/vpast (padded to past_pad), the t own keys in kown/vown
   (padded to own_pad); `scale` is the softmax scale. 0 on success, 1 on shapes the kernel does not take. */
int ls_attend(const uint16_t *q, int64_t q_stride, const uint16_t *kpast, const uint16_t *vpast, int64_t past,
              int64_t past_pad, const uint16_t *kown, const uint16_t *vown, int64_t own_pad,
              const int32_t *row_start, int64_t t, int h, int kvh, int d, float scale, uint16_t *out) {
    if (d % 32 || d > MAXD || kvh < 1 || h % kvh || past_pad % BK || own_pad % BK || own_pad < t || t < 1 ||
        past > past_pad)
        return 1;
    job jb = {q, kpast, vpast, kown, vown, row_start, out, q_stride, past, past_pad, own_pad, t, h, kvh, d,
              scale * 1.4426950408889634f};
    int64_t nqb = (t + BQ - 1) / BQ;
    /* torch's own OpenMP team (the process has one libgomp): its threads, just done with the previous op,
       take the items at once instead of spinning beside threads of ours. Round-robin items balance the
       causal blocks' unequal work. */
#pragma omp parallel num_threads(threads)
    {
        tilecfg cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.palette = 1;
        for (int i = 0; i < 8; i++) {
            cfg.rows[i] = 16;
            cfg.colsb[i] = 64;
        }
        _tile_loadconfig(&cfg);
#pragma omp for schedule(static, 1)
        for (int64_t w = 0; w < h * nqb; w++) item(&jb, (int)(w / nqb), (w % nqb) * BQ);
        _tile_release();
    }
    return 0;
}

/* Keys src[token * tok_stride + head * head_stride + c] (n tokens, kvh heads, d dims) into the kernel's B
   layout for Q·Kᵀ, zero from n to n_pad: a transpose of 16 x 16 blocks of bf16 pairs. */
void ls_pack_k(const uint16_t *src, int64_t tok_stride, int64_t head_stride, int64_t n, int kvh, int d,
               uint16_t *dst, int64_t n_pad) {
    const int steps = d / 32;
#pragma omp parallel for collapse(2) num_threads(threads)
    for (int hd = 0; hd < kvh; hd++)
        for (int64_t kb = 0; kb < n_pad / 16; kb++)
            for (int st = 0; st < steps; st++) {
                uint32_t *tile = (uint32_t *)(dst + (((int64_t)hd * (n_pad / 16) + kb) * steps + st) * 512);
                for (int key = 0; key < 16; key++) {
                    int64_t tok = kb * 16 + key;
                    const uint32_t *row = tok < n ? (const uint32_t *)(src + tok * tok_stride + hd * head_stride + st * 32)
                                                  : NULL;
                    for (int pr = 0; pr < 16; pr++) tile[pr * 16 + key] = row ? row[pr] : 0;
                }
            }
}

/* Values (as ls_pack_k takes keys) into the B layout for P·V: pairs of consecutive keys interleaved. */
void ls_pack_v(const uint16_t *src, int64_t tok_stride, int64_t head_stride, int64_t n, int kvh, int d,
               uint16_t *dst, int64_t n_pad) {
    const int cols = d / 16;
#pragma omp parallel for collapse(2) num_threads(threads)
    for (int hd = 0; hd < kvh; hd++)
        for (int64_t kb = 0; kb < n_pad / 32; kb++)
            for (int c = 0; c < cols; c++) {
                uint16_t *tile = dst + (((int64_t)hd * (n_pad / 32) + kb) * cols + c) * 512;
                for (int pr = 0; pr < 16; pr++)
                    for (int e = 0; e < 2; e++) {
                        int64_t tok = kb * 32 + 2 * pr + e;
                        const uint16_t *row = tok < n ? src + tok * tok_stride + hd * head_stride + c * 16 : NULL;
                        for (int x = 0; x < 16; x++) tile[pr * 32 + x * 2 + e] = row ? row[x] : 0;
                    }
            }
}

static inline __m512 load_bf16(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

static inline void store_bf16(uint16_t *p, __m512 x, __mmask16 m) {
    _mm256_mask_storeu_epi16(p, m, (__m256i)_mm512_cvtneps_pbh(x));
}

static inline __mmask16 lanes(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }

/* transformers' RMSNorm on bf16 rows: x / sqrt(mean(x²) + eps) in fp32, rounded to bf16, then (where w is
   given) times w, rounded again, as torch's two steps do. Row r at x + r * stride, n values; out contiguous. */
void ls_rms_norm(const uint16_t *x, int64_t rows, int64_t n, int64_t stride, float eps, const uint16_t *w,
                 uint16_t *out) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *row = x + r * stride;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t c = 0; c < n; c += 16) {
            __m512 v = load_bf16(row + c, lanes(n - c));
            acc = _mm512_fmadd_ps(v, v, acc);
        }
        __m512 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)n + eps));
        for (int64_t c = 0; c < n; c += 16) {
            __mmask16 m = lanes(n - c);
            __m512 y = _mm512_mul_ps(load_bf16(row + c, m), inv);
            if (w) { /* round to bf16 first, as the unweighted norm's output is, then weigh */
                __m512i b = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(y));
                y = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(b, 16)), load_bf16(w + c, m));
            }
            store_bf16(out + r * n + c, y, m);
        }
    }
}

/* Rotary on interleaved pairs: token i's (t, heads, d) values, pair p of every head, times the complex
   cs[i][p] = (cos, sin), in fp32, rounded to bf16. x row i at x + i * tok_stride (heads x d contiguous). */
void ls_rotary(const uint16_t *x, int64_t t, int heads, int d, int64_t tok_stride, const float *cs,
               uint16_t *out) {
    const int64_t width = (int64_t)heads * d;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < t; i++)
        for (int64_t c = 0; c < width; c += 16) {
            __mmask16 m = lanes(width - c);
            __m512 v = load_bf16(x + i * tok_stride + c, m);
            __m512 f = _mm512_maskz_loadu_ps(m, cs + i * d + c % d); /* (cos, sin) pairs of these dims */
            __m512 swapped = _mm512_permute_ps(v, 0xB1);             /* (b, a) for each (a, b) */
            /* even lanes a·cos − b·sin, odd lanes b·cos + a·sin */
            __m512 y = _mm512_fmaddsub_ps(v, _mm512_moveldup_ps(f), _mm512_mul_ps(swapped, _mm512_movehdup_ps(f)));
            store_bf16(out + i * width + c, y, m);
        }
}
