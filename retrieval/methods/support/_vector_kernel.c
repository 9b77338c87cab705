/* The vector search's two passes beyond the float32 products, in C
   (retrieval.methods.support.vector_kernel loads it; numpy does the same where it was not built).

   `chunk_candidates`: for one chunk of documents just scored in float32
   (retrieval.methods.support.vector_kernel.scan_range), every (question, document) whose float32
   score is >= the question's threshold, in (question, document) order, with its score, each
   question's best kept beside, raising its threshold every k candidates: one pass over the scores
   while they are in cache, instead of a compare, a flatnonzero, a divmod and the merges of the
   best (`kept_best` then gives each question's k best).

   `kept_counts`, `kept_rescored`: a range's final candidates counted by question, then scored in
   float64 from the documents' float32 rows in the corpus, read in place (no gathered copy), in
   chunk order, each written at its question's place; `ranked`: each question's candidates
   rounded and ranked as retrieval.run.ranking.top_k ranks them.

   The float64 products must not depend on the CPU or the compiler: the build keeps IEEE
   semantics (no -ffast-math, -ffp-contract=off: no fused multiply-add), and each sum runs in the
   fixed order of `dot` below, whatever the vector width the compiler chooses for it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* Partial sums: term i goes to sum i % LANES, then the sums are added in a fixed tree (16
   independent sums: the additions' latency hidden, 8 or 16 registers wide). */
#define LANES 16
/* Scores compared together before looking for the ones that pass (most blocks have none). */
#define STRIDE 16

#if defined(__GNUC__) && defined(__x86_64__)
/* The same C compiled a second time for AVX2 (no FMA: the same operations, in the same order, so
   the same results), taken at run time where the CPU has it (`init_dispatch`). */
#define DISPATCH 1
#include <immintrin.h>
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
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

/* numpy's round(x, decimals) for float64: x * scale, rint (to nearest, ties to even), / scale.
   rint by hand (no libm): adding and taking away 2^52 rounds a double below 2^52 to an integer in
   the default rounding mode; larger ones, infinities, NaN and zeros (their sign kept) are left. */
INLINE double rounded(double x, double scale) {
    const double y = x * scale, big = 4503599627370496.0;
    double r = y;
    if (y > 0.0 && y < big) {
        r = (y + big) - big;
    } else if (y < 0.0 && y > -big) {
        r = -((-y + big) - big);
    }
    return r / scale;
}

/* A ranked score as an unsigned key in the order of the ranking: the larger score first (the
   float's bits made unsigned, order kept, then reversed); -0.0 ties 0.0, as numpy compares them. */
typedef struct {
    uint64_t key;
    int64_t at;
} keyed;

INLINE uint64_t descending(double score) {
    const double zero = 0.0;
    if (score == zero) {
        score = zero;
    }
    uint64_t bits;
    memcpy(&bits, &score, sizeof(bits));
    bits = (bits >> 63) ? ~bits : bits | 0x8000000000000000ull;
    return ~bits;
}

/* Sorts items[0..m) by key, a stable radix sort (8 bits a pass; a pass whose digit all the keys
   share is skipped: the scores of one question share their top bytes); `spare` holds m more.
   Returns where the sorted items are (items or spare). */
static keyed *sorted_keys(keyed *items, keyed *spare, Py_ssize_t m) {
    static const int digits = 8;
    Py_ssize_t counts[8][256];
    memset(counts, 0, sizeof(counts));
    for (Py_ssize_t i = 0; i < m; i++) {
        for (int d = 0; d < digits; d++) {
            counts[d][(items[i].key >> (8 * d)) & 255]++;
        }
    }
    for (int d = 0; d < digits && m > 0; d++) {
        Py_ssize_t *count = counts[d];
        if (count[(items[0].key >> (8 * d)) & 255] == m) {
            continue;
        }
        Py_ssize_t total = 0;
        for (int v = 0; v < 256; v++) {
            const Py_ssize_t here = count[v];
            count[v] = total;
            total += here;
        }
        for (Py_ssize_t i = 0; i < m; i++) {
            spare[count[(items[i].key >> (8 * d)) & 255]++] = items[i];
        }
        keyed *swap = items;
        items = spare;
        spare = swap;
    }
    return items;
}

/* Questions lo..hi-1: each one's final candidates (documents[starts[q]..starts[q+1]), in
   document order, their float64 scores beside) rounded as numpy rounds, and ranked as top_k ranks
   them: the larger rounded score first, a tie to the lower document (the earlier candidate: the
   sort is stable); the first min(k, m) into row q of indices and scores, their count into
   lengths[q], or -1 where a score is NaN (the caller ranks that question as top_k does). Returns 0
   when out of memory. */
static int ranked_body(const int64_t *documents, const double *exact, const int64_t *starts, Py_ssize_t lo,
                       Py_ssize_t hi, Py_ssize_t k, double scale, int64_t *indices, double *scores, int64_t *lengths) {
    Py_ssize_t most = 0;
    for (Py_ssize_t q = lo; q < hi; q++) {
        most = starts[q + 1] - starts[q] > most ? starts[q + 1] - starts[q] : most;
    }
    keyed *items = malloc(2 * (size_t)(most ? most : 1) * sizeof(keyed));
    double *round = malloc((size_t)(most ? most : 1) * sizeof(double));
    if (items == NULL || round == NULL) {
        free(items);
        free(round);
        return 0;
    }
    for (Py_ssize_t q = lo; q < hi; q++) {
        const Py_ssize_t first = starts[q], m = starts[q + 1] - first;
        int nan = 0;
        for (Py_ssize_t i = 0; i < m; i++) {
            round[i] = rounded(exact[first + i], scale);
            nan |= round[i] != round[i];
            items[i].key = descending(round[i]);
            items[i].at = i;
        }
        if (nan) {
            lengths[q] = -1;
            continue;
        }
        const keyed *order = sorted_keys(items, items + most, m);
        const Py_ssize_t length = m < k ? m : k;
        for (Py_ssize_t j = 0; j < length; j++) {
            indices[q * k + j] = documents[first + order[j].at];
            scores[q * k + j] = round[order[j].at];
        }
        lengths[q] = length;
    }
    free(items);
    free(round);
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
static void init_dispatch(void) {
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
static void init_dispatch(void) {}
#endif

static int long_enough(Py_buffer *buffer, Py_ssize_t items, Py_ssize_t size, const char *name) {
    if (items < 0 || buffer->len < items * size) {
        PyErr_Format(PyExc_ValueError, "_vector_kernel: %s holds %zd bytes, %zd needed", name, buffer->len,
                     items * size);
        return 0;
    }
    return 1;
}

static void release(Py_buffer **buffers, size_t count) {
    for (size_t i = 0; i < count; i++) {
        PyBuffer_Release(buffers[i]);
    }
}

PyDoc_STRVAR(chunk_candidates_doc,
             "chunk_candidates(scores, threshold, floor, margin, best, sizes, rows, cols, values, n_questions,"
             " width, k, start) -> count\n\n"
             "Each (question, document) of a chunk whose float32 score is >= the question's threshold, in"
             " (question, document) order: its row, its column + start and its score; each joins its"
             " question's best (best, sizes), which raise the threshold (in place) once there are k, and"
             " each k more. C-contiguous buffers: scores float32 (n_questions x width), threshold and floor"
             " float32 and margin float64 (n_questions), best float32 (n_questions x 2k), sizes int64"
             " (n_questions); rows and cols int32 and values float32, with room for every score; start + width"
             " at most 2^31 - 1.");

static PyObject *chunk_candidates(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer scores, threshold, floor, margin, best, sizes, rows, cols, values;
    Py_ssize_t n_questions, width, k;
    long long start;
    if (!PyArg_ParseTuple(args, "y*w*y*y*w*w*w*w*w*nnnL", &scores, &threshold, &floor, &margin, &best, &sizes, &rows,
                          &cols, &values, &n_questions, &width, &k, &start)) {
        return NULL;
    }
    Py_ssize_t found = -1;
    const Py_ssize_t room = n_questions * width;
    if (long_enough(&scores, n_questions * width, sizeof(float), "scores") &&
        long_enough(&threshold, n_questions, sizeof(float), "threshold") &&
        long_enough(&floor, n_questions, sizeof(float), "floor") &&
        long_enough(&margin, n_questions, sizeof(double), "margin") &&
        long_enough(&best, n_questions * 2 * k, sizeof(float), "best") &&
        long_enough(&sizes, n_questions, sizeof(int64_t), "sizes") &&
        long_enough(&rows, room, sizeof(int32_t), "rows") && long_enough(&cols, room, sizeof(int32_t), "cols") &&
        long_enough(&values, room, sizeof(float), "values")) {
        const int64_t *held = sizes.buf;
        int sound = k > 0 && start >= 0 && n_questions <= INT32_MAX && start + width <= INT32_MAX;
        for (Py_ssize_t q = 0; sound && q < n_questions; q++) {
            sound = held[q] >= 0 && held[q] < 2 * k;
        }
        if (!sound) {
            PyErr_SetString(PyExc_ValueError, "_vector_kernel: k must be positive, each size below 2k and the"
                                              " columns within int32");
        } else {
            Py_BEGIN_ALLOW_THREADS;
            found = candidates(scores.buf, threshold.buf, floor.buf, margin.buf, best.buf, sizes.buf, n_questions,
                               width, k, (int64_t)start, rows.buf, cols.buf, values.buf);
            Py_END_ALLOW_THREADS;
        }
    }
    Py_buffer *all[] = {&scores, &threshold, &floor, &margin, &best, &sizes, &rows, &cols, &values};
    release(all, sizeof(all) / sizeof(all[0]));
    return found < 0 ? NULL : PyLong_FromSsize_t(found);
}

PyDoc_STRVAR(kept_best_doc,
             "kept_best(best, sizes, n_questions, k)\n\n"
             "Each question's k largest of the sizes[q] held in its 2k places of best (float32,"
             " n_questions x 2k), moved to its first k places (the rest of them -inf where fewer).");

static PyObject *kept_best(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer best, sizes;
    Py_ssize_t n_questions, k;
    if (!PyArg_ParseTuple(args, "w*w*nn", &best, &sizes, &n_questions, &k)) {
        return NULL;
    }
    int done = 0;
    if (long_enough(&best, n_questions * 2 * k, sizeof(float), "best") &&
        long_enough(&sizes, n_questions, sizeof(int64_t), "sizes")) {
        int64_t *held = sizes.buf;
        done = k > 0;
        for (Py_ssize_t q = 0; done && q < n_questions; q++) {
            done = held[q] >= 0 && held[q] <= 2 * k;
        }
        if (!done) {
            PyErr_SetString(PyExc_ValueError, "_vector_kernel: k must be positive and each size within 0..2k");
        } else {
            float *values = best.buf;
            Py_BEGIN_ALLOW_THREADS;
            for (Py_ssize_t q = 0; q < n_questions; q++) {
                float *row = values + q * 2 * k;
                if (held[q] > k) {
                    keep_largest(row, held[q], k);
                    held[q] = k;
                }
                for (Py_ssize_t i = held[q]; i < k; i++) {
                    row[i] = -INFINITY;
                }
            }
            Py_END_ALLOW_THREADS;
        }
    }
    PyBuffer_Release(&best);
    PyBuffer_Release(&sizes);
    if (!done) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(kept_counts_doc,
             "kept_counts(rows, values, threshold, counts, n_candidates, n_questions)\n\n"
             "counts[q] += the count of candidates i of question rows[i] = q whose values[i] >= threshold[q]."
             " C-contiguous buffers: rows int32 and values float32 (n_candidates), threshold float32 and counts"
             " int64 (n_questions).");

static PyObject *kept_counts(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer rows, values, threshold, counts;
    Py_ssize_t n_candidates, n_questions;
    if (!PyArg_ParseTuple(args, "y*y*y*w*nn", &rows, &values, &threshold, &counts, &n_candidates, &n_questions)) {
        return NULL;
    }
    int done = 0;
    if (long_enough(&rows, n_candidates, sizeof(int32_t), "rows") &&
        long_enough(&values, n_candidates, sizeof(float), "values") &&
        long_enough(&threshold, n_questions, sizeof(float), "threshold") &&
        long_enough(&counts, n_questions, sizeof(int64_t), "counts")) {
        const int32_t *row = rows.buf;
        const float *value = values.buf, *limit = threshold.buf;
        int64_t *count = counts.buf;
        done = 1;
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n_candidates; i++) {
            const int32_t q = row[i];
            if (q < 0 || q >= n_questions) {
                done = 0;
                break;
            }
            count[q] += value[i] >= limit[q];
        }
        Py_END_ALLOW_THREADS;
        if (!done) {
            PyErr_SetString(PyExc_IndexError, "_vector_kernel: a question index is out of range");
        }
    }
    Py_buffer *all[] = {&rows, &values, &threshold, &counts};
    release(all, sizeof(all) / sizeof(all[0]));
    return done ? Py_NewRef(Py_None) : NULL;
}

PyDoc_STRVAR(kept_rescored_doc,
             "kept_rescored(rows, cols, values, threshold, positions, documents, questions, narrow, out_documents,"
             " out_exact, n_candidates, n_documents, n_questions, dims, room)\n\n"
             "Each candidate i whose values[i] >= threshold[rows[i]], in order: at p = positions[rows[i]]"
             " (then advanced), out_documents[p] = cols[i] and out_exact[p] = the float64 dot product of"
             " document cols[i] (a float32 row of documents) with question rows[i] (a row of questions),"
             " summed in a fixed order. C-contiguous buffers: rows and cols int32, values float32"
             " (n_candidates), threshold float32 and positions int64 (n_questions), documents float32"
             " (n_documents x dims), questions float64 (float32 where narrow) (n_questions x dims),"
             " out_documents int64 and out_exact float64 (room).");

static PyObject *kept_rescored(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer rows, cols, values, threshold, positions, documents, questions, out_documents, out_exact;
    Py_ssize_t n_candidates, n_documents, n_questions, dims, room;
    int narrow;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*y*y*pw*w*nnnnn", &rows, &cols, &values, &threshold, &positions,
                          &documents, &questions, &narrow, &out_documents, &out_exact, &n_candidates, &n_documents,
                          &n_questions, &dims, &room)) {
        return NULL;
    }
    int done = 0;
    if (long_enough(&rows, n_candidates, sizeof(int32_t), "rows") &&
        long_enough(&cols, n_candidates, sizeof(int32_t), "cols") &&
        long_enough(&values, n_candidates, sizeof(float), "values") &&
        long_enough(&threshold, n_questions, sizeof(float), "threshold") &&
        long_enough(&positions, n_questions, sizeof(int64_t), "positions") &&
        long_enough(&documents, n_documents * dims, sizeof(float), "documents") &&
        long_enough(&questions, n_questions * dims, narrow ? sizeof(float) : sizeof(double), "questions") &&
        long_enough(&out_documents, room, sizeof(int64_t), "out_documents") &&
        long_enough(&out_exact, room, sizeof(double), "out_exact")) {
        Py_BEGIN_ALLOW_THREADS;
        done = kept(rows.buf, cols.buf, values.buf, n_candidates, threshold.buf, positions.buf, documents.buf,
                    n_documents, questions.buf, narrow, n_questions, dims, out_documents.buf, out_exact.buf, room);
        Py_END_ALLOW_THREADS;
        if (!done) {
            PyErr_SetString(PyExc_IndexError, "_vector_kernel: a question, document or place is out of range");
        }
    }
    Py_buffer *all[] = {&rows, &cols, &values, &threshold, &positions, &documents, &questions, &out_documents,
                        &out_exact};
    release(all, sizeof(all) / sizeof(all[0]));
    return done ? Py_NewRef(Py_None) : NULL;
}

PyDoc_STRVAR(ranked_doc,
             "ranked(documents, exact, starts, indices, scores, lengths, lo, hi, k, scale)\n\n"
             "Questions lo..hi-1: question q's candidates documents[starts[q]:starts[q+1]] (in document order)"
             " with float64 scores exact[...], rounded as numpy's round (x * scale, rint, / scale) and ranked"
             " as top_k ranks them (larger first, a tie to the lower document): the first min(k, m) into"
             " row q of indices (int64) and scores (float64), both n_questions x k, their count into"
             " lengths[q] (int64), -1 where a score is NaN. starts int64 (n_questions + 1), ascending.");

static PyObject *ranked(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer documents, exact, starts, indices, scores, lengths;
    Py_ssize_t lo, hi, k;
    double scale;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*nnnd", &documents, &exact, &starts, &indices, &scores, &lengths, &lo,
                          &hi, &k, &scale)) {
        return NULL;
    }
    int done = 0;
    const Py_ssize_t n_questions = starts.len / (Py_ssize_t)sizeof(int64_t) - 1;
    if (lo < 0 || hi > n_questions || lo > hi || k < 0) {
        PyErr_SetString(PyExc_ValueError, "_vector_kernel: questions lo..hi out of the starts, or k negative");
    } else if (long_enough(&indices, n_questions * k, sizeof(int64_t), "indices") &&
               long_enough(&scores, n_questions * k, sizeof(double), "scores") &&
               long_enough(&lengths, n_questions, sizeof(int64_t), "lengths")) {
        const int64_t *start = starts.buf;
        const Py_ssize_t total = start[n_questions];
        int sound = start[0] >= 0;
        for (Py_ssize_t q = 0; sound && q < n_questions; q++) {
            sound = start[q] <= start[q + 1];
        }
        if (!sound) {
            PyErr_SetString(PyExc_ValueError, "_vector_kernel: starts must ascend from 0 or more");
        } else if (long_enough(&documents, total, sizeof(int64_t), "documents") &&
                   long_enough(&exact, total, sizeof(double), "exact")) {
            Py_BEGIN_ALLOW_THREADS;
            done = ranked_body(documents.buf, exact.buf, start, lo, hi, k, scale, indices.buf, scores.buf,
                               lengths.buf);
            Py_END_ALLOW_THREADS;
            if (!done) {
                PyErr_NoMemory();
            }
        }
    }
    Py_buffer *all[] = {&documents, &exact, &starts, &indices, &scores, &lengths};
    release(all, sizeof(all) / sizeof(all[0]));
    return done ? Py_NewRef(Py_None) : NULL;
}

static PyMethodDef methods[] = {
    {"chunk_candidates", chunk_candidates, METH_VARARGS, chunk_candidates_doc},
    {"kept_best", kept_best, METH_VARARGS, kept_best_doc},
    {"kept_counts", kept_counts, METH_VARARGS, kept_counts_doc},
    {"kept_rescored", kept_rescored, METH_VARARGS, kept_rescored_doc},
    {"ranked", ranked, METH_VARARGS, ranked_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_vector_kernel", "The vector search's candidate and rescoring passes (C).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__vector_kernel(void) {
    init_dispatch();
    return PyModule_Create(&module);
}
