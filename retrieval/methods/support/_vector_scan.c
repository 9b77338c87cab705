/* The vector search's pass over each chunk's float32 scores and the float64 rescoring of the
   candidates it keeps (part of retrieval.methods.support._vector_kernel; _vector_kernel.c binds
   them to Python).

   The float64 products must not depend on the CPU or the compiler: the build keeps IEEE
   semantics (no -ffast-math, -ffp-contract=off: no fused multiply-add), and each sum runs in the
   fixed order of `dot` below, whatever the vector width the compiler chooses for it. The
   `INLINE` bodies stay in this file, beside the `target` clones they are compiled into. */

#include "_vector_kernel.h"

#include <math.h>
#include <string.h>

/* Partial sums: term i goes to sum i % LANES, then the sums are added in a fixed tree (16
   independent sums: the additions' latency hidden, 8 or 16 registers wide). */
#define LANES 16
/* Scores compared together before looking for the ones that pass (most blocks have none). */
#define STRIDE 16

#if defined(__GNUC__) && defined(__x86_64__)
/* The same C compiled a second time for AVX2 (no FMA: the same operations, in the same order, so
   the same results), taken at run time where the CPU has it (`vk_init_dispatch`). */
#define DISPATCH 1
#include <immintrin.h>
#endif

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
/* Whether any of the STRIDE scores is >= t (a NaN compares false). */
INLINE int any_at_least(const float *line, float t) {
    const __m128 limit = _mm_set1_ps(t);
    const __m128 a = _mm_cmpge_ps(_mm_loadu_ps(line), limit);
    const __m128 b = _mm_cmpge_ps(_mm_loadu_ps(line + 4), limit);
    const __m128 c = _mm_cmpge_ps(_mm_loadu_ps(line + 8), limit);
    const __m128 d = _mm_cmpge_ps(_mm_loadu_ps(line + 12), limit);
    return _mm_movemask_ps(_mm_or_ps(_mm_or_ps(a, b), _mm_or_ps(c, d)));
}
#else
INLINE int any_at_least(const float *line, float t) {
    int any = 0;
    for (int j = 0; j < STRIDE; j++) {
        any |= line[j] >= t;
    }
    return any;
}
#endif

#ifdef DISPATCH
/* The same test in two AVX2 compares of 8 (the AVX2 clone of the candidate pass). */
static inline __attribute__((target("avx2"))) int any_at_least_avx2(const float *line, float t) {
    const __m256 limit = _mm256_set1_ps(t);
    const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(line), limit, _CMP_GE_OQ);
    const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(line + 8), limit, _CMP_GE_OQ);
    return _mm256_movemask_ps(_mm256_or_ps(a, b));
}
#else
#define any_at_least_avx2 any_at_least
#endif

/* The float64 dot product of a float32 row with a question given in float64 (dot) or in float32
   (dot32: a float64 question that float32 holds exactly, half the bytes to read; each term and
   so the result the same). */
#define DOT(name, question_type)                                                                                     \
    INLINE double name(const float *row, const question_type *question, Py_ssize_t dims) {                          \
        double sums[LANES] = {0.0};                                                                                  \
        Py_ssize_t i = 0;                                                                                            \
        for (; i + LANES <= dims; i += LANES) {                                                                      \
            for (int lane = 0; lane < LANES; lane++) {                                                               \
                sums[lane] += (double)row[i + lane] * (double)question[i + lane];                                    \
            }                                                                                                        \
        }                                                                                                            \
        for (int lane = 0; i < dims; i++, lane++) {                                                                  \
            sums[lane] += (double)row[i] * (double)question[i];                                                      \
        }                                                                                                            \
        for (int half = LANES / 2; half > 0; half /= 2) {                                                            \
            for (int lane = 0; lane < half; lane++) {                                                                \
                sums[lane] += sums[lane + half];                                                                     \
            }                                                                                                        \
        }                                                                                                            \
        return sums[0];                                                                                              \
    }
DOT(dot, double)
DOT(dot32, float)

/* values - margin in float32, never above the float64 difference (vector._below). */
INLINE float below(float value, double margin) {
    const double exact = (double)value - margin;
    float rounded = (float)exact;
    if ((double)rounded > exact) {
        /* The next float32 down (nextafterf towards -inf, without libm): its bits one step on. */
        uint32_t bits;
        memcpy(&bits, &rounded, sizeof(bits));
        if (rounded > 0.0f) {
            bits -= 1;
        } else if (rounded < 0.0f) {
            bits += 1;
        } else {
            bits = 0x80000001u; /* below zero: the negative float32 closest to it */
        }
        memcpy(&rounded, &bits, sizeof(bits));
    }
    return rounded;
}

/* Reorders values[0..n) so that values[0..k) are its k largest (0 < k <= n; no NaN): a
   quickselect, median of three, expected linear time. */
INLINE void keep_largest(float *values, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const Py_ssize_t mid = lo + (hi - lo) / 2;
        float a = values[lo], b = values[mid], c = values[hi];
        const float pivot = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (values[i] > pivot) {
                i++;
            }
            while (values[j] < pivot) {
                j--;
            }
            if (i <= j) {
                const float swap = values[i];
                values[i] = values[j];
                values[j] = swap;
                i++;
                j--;
            }
        }
        /* values[lo..j] >= pivot >= values[i..hi], and values[j+1..i-1] == pivot. */
        if (k - 1 <= j) {
            hi = j;
        } else if (k - 1 >= i) {
            lo = i;
        } else {
            return;
        }
    }
}

/* The smallest of values[0..n). */
INLINE float smallest(const float *values, Py_ssize_t n) {
    float least = values[0];
    for (Py_ssize_t i = 1; i < n; i++) {
        least = values[i] < least ? values[i] : least;
    }
    return least;
}

/* The candidates of one chunk of a corpus range (vector._scan): each (question, document) whose
   float32 score is >= the question's threshold at that moment, appended in (question, document)
   order with its score. Each candidate also joins its question's best (2k places in `best`,
   sizes[q] held): once k are held, and each time 2k are, the k largest are kept and the
   threshold rises to the larger of the question's floor and the k-th best - margin (rounded down
   to float32): a lower bound of the final depth-th best - 2M, as the numpy path's merged best,
   question by question. A NaN score or threshold compares false, as numpy's greater_equal.
   Returns the count (room for every score of the chunk is the caller's). */
INLINE Py_ssize_t candidates_body(const float *scores, float *threshold, const float *floor, const double *margin,
                                  float *best, int64_t *sizes, Py_ssize_t n_questions, Py_ssize_t width, Py_ssize_t k,
                                  int64_t start, int32_t *rows, int32_t *cols, float *values, int wide) {
    Py_ssize_t found = 0;
    for (Py_ssize_t q = 0; q < n_questions; q++) {
        const float *line = scores + q * width;
        float *held = best + q * 2 * k;
        Py_ssize_t size = (Py_ssize_t)sizes[q];
        float t = threshold[q];
        for (Py_ssize_t c = 0; c < width; c += STRIDE) {
            const Py_ssize_t end = c + STRIDE <= width ? c + STRIDE : width;
            if (end - c == STRIDE && !(wide ? any_at_least_avx2(line + c, t) : any_at_least(line + c, t))) {
                continue;
            }
            for (Py_ssize_t d = c; d < end; d++) {
                const float score = line[d];
                if (!(score >= t)) {
                    continue;
                }
                rows[found] = (int32_t)q;
                cols[found] = (int32_t)(start + (int64_t)d);
                values[found] = score;
                found++;
                held[size++] = score;
                float kth;
                if (size == 2 * k) {
                    keep_largest(held, size, k);
                    size = k;
                    kth = smallest(held, k);
                } else if (size == k) {
                    kth = smallest(held, k);
                } else {
                    continue;
                }
                const float raised = below(kth, margin[q]);
                t = raised > floor[q] ? raised : floor[q];
            }
        }
        threshold[q] = t;
        sizes[q] = (int64_t)size;
    }
    return found;
}

/* A corpus range's final candidates (those of its scan, rows, cols and values, whose float32 score
   is >= their question's threshold: t - 2M) scored in float64, each written at its question's next
   place (positions[q], advanced): document and score. The candidates come in chunk order, so the
   corpus is read forward once, each chunk's rows close together. Questions are float64 rows, or
   float32 where `narrow` (float32 embeddings: the same products, half the bytes). 0 when an index
   or a place is out of range. */
INLINE int kept_body(const int32_t *rows, const int32_t *cols, const float *values, Py_ssize_t n_candidates,
                     const float *threshold, int64_t *positions, const float *documents, Py_ssize_t n_documents,
                     const void *questions, int narrow, Py_ssize_t n_questions, Py_ssize_t dims,
                     int64_t *out_documents, double *out_exact, Py_ssize_t room) {
    for (Py_ssize_t i = 0; i < n_candidates; i++) {
        const int32_t q = rows[i];
        if (q < 0 || q >= n_questions) {
            return 0;
        }
        if (!(values[i] >= threshold[q])) {
            continue;
        }
        const int64_t d = cols[i], at = positions[q];
        if (d < 0 || d >= n_documents || at < 0 || at >= room) {
            return 0;
        }
        positions[q] = at + 1;
        out_documents[at] = d;
        out_exact[at] = narrow ? dot32(documents + d * dims, (const float *)questions + q * dims, dims)
                               : dot(documents + d * dims, (const double *)questions + q * dims, dims);
    }
    return 1;
}

typedef Py_ssize_t (*candidates_fn)(const float *, float *, const float *, const double *, float *, int64_t *,
                                    Py_ssize_t, Py_ssize_t, Py_ssize_t, int64_t, int32_t *, int32_t *, float *);
typedef int (*kept_fn)(const int32_t *, const int32_t *, const float *, Py_ssize_t, const float *, int64_t *,
                       const float *, Py_ssize_t, const void *, int, Py_ssize_t, Py_ssize_t, int64_t *, double *,
                       Py_ssize_t);

#define CANDIDATES_ARGS                                                                                              \
    const float *scores, float *threshold, const float *floor, const double *margin, float *best, int64_t *sizes,    \
        Py_ssize_t n_questions, Py_ssize_t width, Py_ssize_t k, int64_t start, int32_t *rows, int32_t *cols,          \
        float *values
#define CANDIDATES_CALL scores, threshold, floor, margin, best, sizes, n_questions, width, k, start, rows, cols, values
#define KEPT_ARGS                                                                                                    \
    const int32_t *rows, const int32_t *cols, const float *values, Py_ssize_t n_candidates, const float *threshold,   \
        int64_t *positions, const float *documents, Py_ssize_t n_documents, const void *questions, int narrow,       \
        Py_ssize_t n_questions, Py_ssize_t dims, int64_t *out_documents, double *out_exact, Py_ssize_t room
#define KEPT_CALL                                                                                                    \
    rows, cols, values, n_candidates, threshold, positions, documents, n_documents, questions, narrow, n_questions,   \
        dims, out_documents, out_exact, room

static Py_ssize_t candidates_default(CANDIDATES_ARGS) {
    return candidates_body(CANDIDATES_CALL, 0);
}
static int kept_default(KEPT_ARGS) {
    return kept_body(KEPT_CALL);
}
static candidates_fn candidates = candidates_default;
static kept_fn kept = kept_default;

#ifdef DISPATCH
__attribute__((target("avx2"))) static Py_ssize_t candidates_avx2(CANDIDATES_ARGS) {
    return candidates_body(CANDIDATES_CALL, 1);
}
__attribute__((target("avx2"))) static int kept_avx2(KEPT_ARGS) {
    return kept_body(KEPT_CALL);
}
__attribute__((target("avx512f"))) static int kept_avx512(KEPT_ARGS) {
    return kept_body(KEPT_CALL);
}
void vk_init_dispatch(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        candidates = candidates_avx2;
        kept = kept_avx2;
    }
    if (__builtin_cpu_supports("avx512f")) {
        kept = kept_avx512;
    }
}
#else
void vk_init_dispatch(void) {}
#endif

Py_ssize_t vk_chunk_candidates(CANDIDATES_ARGS) {
    return candidates(CANDIDATES_CALL);
}

int vk_kept_rescored(KEPT_ARGS) {
    return kept(KEPT_CALL);
}

void vk_kept_best(float *best, int64_t *sizes, Py_ssize_t n_questions, Py_ssize_t k) {
    for (Py_ssize_t q = 0; q < n_questions; q++) {
        float *row = best + q * 2 * k;
        if (sizes[q] > k) {
            keep_largest(row, sizes[q], k);
            sizes[q] = k;
        }
        for (Py_ssize_t i = sizes[q]; i < k; i++) {
            row[i] = -INFINITY;
        }
    }
}

int vk_kept_counts(const int32_t *rows, const float *values, const float *threshold, int64_t *counts,
                   Py_ssize_t n_candidates, Py_ssize_t n_questions) {
    for (Py_ssize_t i = 0; i < n_candidates; i++) {
        const int32_t q = rows[i];
        if (q < 0 || q >= n_questions) {
            return 0;
        }
        counts[q] += values[i] >= threshold[q];
    }
    return 1;
}
