/* The vector search's two passes beyond the float32 products, in C
   (retrieval.methods.support.vector_kernel loads it; numpy does the same where it was not built).

   `chunk_candidates`: for one chunk of documents just scored in float32
   (retrieval.methods.support.vector_kernel.scan_range), every (question, document) whose float32
   score is >= the question's threshold, in (question, document) order, with its score, each
   question's best kept beside, raising its threshold every k candidates: one pass over the scores
   while they are in cache, instead of a compare, a flatnonzero, a divmod and the merges of the
   best (`kept_best` then gives each question's k best).

   `rescored`: (document, question) pairs scored in float64 from the documents' float32 rows in
   the corpus, read in place (no gathered copy), in document order.

   The float64 products must not depend on the CPU or the compiler: the build keeps IEEE
   semantics (no -ffast-math, -ffp-contract=off: no fused multiply-add), and each sum runs in the
   fixed order of `dot` below, whatever the vector width the compiler chooses for it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
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
                                  int64_t start, int64_t *rows, int64_t *cols, float *values) {
    Py_ssize_t found = 0;
    for (Py_ssize_t q = 0; q < n_questions; q++) {
        const float *line = scores + q * width;
        float *held = best + q * 2 * k;
        Py_ssize_t size = (Py_ssize_t)sizes[q];
        float t = threshold[q];
        for (Py_ssize_t c = 0; c < width; c += STRIDE) {
            const Py_ssize_t end = c + STRIDE <= width ? c + STRIDE : width;
            if (end - c == STRIDE && !any_at_least(line + c, t)) {
                continue;
            }
            for (Py_ssize_t d = c; d < end; d++) {
                const float score = line[d];
                if (!(score >= t)) {
                    continue;
                }
                rows[found] = (int64_t)q;
                cols[found] = start + (int64_t)d;
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

/* Each pair's float64 dot product: document documents[i] (a float32 row) with question
   questions[i] (a float64 row, or float32 where `narrow`); 0 when an index is out of range. Pairs
   come in document order, so that the corpus is read forward once. */
INLINE int rescore_body(const float *documents, Py_ssize_t n_documents, const void *questions, int narrow,
                        Py_ssize_t n_questions, Py_ssize_t dims, const int64_t *which_documents,
                        const int64_t *which_questions, Py_ssize_t n_pairs, double *exact) {
    for (Py_ssize_t i = 0; i < n_pairs; i++) {
        if (which_documents[i] < 0 || which_documents[i] >= n_documents || which_questions[i] < 0 ||
            which_questions[i] >= n_questions) {
            return 0;
        }
    }
    if (narrow) {
        for (Py_ssize_t i = 0; i < n_pairs; i++) {
            const float *question = (const float *)questions + which_questions[i] * dims;
            exact[i] = dot32(documents + which_documents[i] * dims, question, dims);
        }
    } else {
        for (Py_ssize_t i = 0; i < n_pairs; i++) {
            const double *question = (const double *)questions + which_questions[i] * dims;
            exact[i] = dot(documents + which_documents[i] * dims, question, dims);
        }
    }
    return 1;
}

typedef Py_ssize_t (*candidates_fn)(const float *, float *, const float *, const double *, float *, int64_t *,
                                    Py_ssize_t, Py_ssize_t, Py_ssize_t, int64_t, int64_t *, int64_t *, float *);
typedef int (*rescore_fn)(const float *, Py_ssize_t, const void *, int, Py_ssize_t, Py_ssize_t, const int64_t *,
                          const int64_t *, Py_ssize_t, double *);

#define CANDIDATES_ARGS                                                                                              \
    const float *scores, float *threshold, const float *floor, const double *margin, float *best, int64_t *sizes,    \
        Py_ssize_t n_questions, Py_ssize_t width, Py_ssize_t k, int64_t start, int64_t *rows, int64_t *cols,          \
        float *values
#define CANDIDATES_CALL scores, threshold, floor, margin, best, sizes, n_questions, width, k, start, rows, cols, values
#define RESCORE_ARGS                                                                                                 \
    const float *documents, Py_ssize_t n_documents, const void *questions, int narrow, Py_ssize_t n_questions,       \
        Py_ssize_t dims, const int64_t *which_documents, const int64_t *which_questions, Py_ssize_t n_pairs,         \
        double *exact

static Py_ssize_t candidates_default(CANDIDATES_ARGS) {
    return candidates_body(CANDIDATES_CALL);
}
static int rescore_default(RESCORE_ARGS) {
    return rescore_body(documents, n_documents, questions, narrow, n_questions, dims, which_documents,
                        which_questions, n_pairs, exact);
}
static candidates_fn candidates = candidates_default;
static rescore_fn rescore = rescore_default;

#ifdef DISPATCH
__attribute__((target("avx2"))) static Py_ssize_t candidates_avx2(CANDIDATES_ARGS) {
    return candidates_body(CANDIDATES_CALL);
}
__attribute__((target("avx2"))) static int rescore_avx2(RESCORE_ARGS) {
    return rescore_body(documents, n_documents, questions, narrow, n_questions, dims, which_documents,
                        which_questions, n_pairs, exact);
}
__attribute__((target("avx512f"))) static int rescore_avx512(RESCORE_ARGS) {
    return rescore_body(documents, n_documents, questions, narrow, n_questions, dims, which_documents,
                        which_questions, n_pairs, exact);
}
static void init_dispatch(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        candidates = candidates_avx2;
        rescore = rescore_avx2;
    }
    if (__builtin_cpu_supports("avx512f")) {
        rescore = rescore_avx512;
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
             " (n_questions); rows and cols int64 and values float32, with room for every score.");

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
        long_enough(&rows, room, sizeof(int64_t), "rows") && long_enough(&cols, room, sizeof(int64_t), "cols") &&
        long_enough(&values, room, sizeof(float), "values")) {
        const int64_t *held = sizes.buf;
        int sound = k > 0;
        for (Py_ssize_t q = 0; sound && q < n_questions; q++) {
            sound = held[q] >= 0 && held[q] < 2 * k;
        }
        if (!sound) {
            PyErr_SetString(PyExc_ValueError, "_vector_kernel: k must be positive and each size below 2k");
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

PyDoc_STRVAR(rescored_doc,
             "rescored(documents, questions, which_documents, which_questions, exact, narrow, n_documents,"
             " n_questions, dims, n_pairs)\n\n"
             "exact[i] = the float64 dot product of document which_documents[i] (a float32 row of documents)"
             " with question which_questions[i] (a row of questions), summed in a fixed order. C-contiguous"
             " buffers: documents float32 (n_documents x dims), questions float64 (float32 where narrow)"
             " (n_questions x dims), which_documents and which_questions int64 (n_pairs), exact float64.");

static PyObject *rescored(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer documents, questions, which_documents, which_questions, exact;
    Py_ssize_t n_documents, n_questions, dims, n_pairs;
    int narrow;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*pnnnn", &documents, &questions, &which_documents, &which_questions, &exact,
                          &narrow, &n_documents, &n_questions, &dims, &n_pairs)) {
        return NULL;
    }
    int done = 0;
    if (long_enough(&documents, n_documents * dims, sizeof(float), "documents") &&
        long_enough(&questions, n_questions * dims, narrow ? sizeof(float) : sizeof(double), "questions") &&
        long_enough(&which_documents, n_pairs, sizeof(int64_t), "which_documents") &&
        long_enough(&which_questions, n_pairs, sizeof(int64_t), "which_questions") &&
        long_enough(&exact, n_pairs, sizeof(double), "exact")) {
        Py_BEGIN_ALLOW_THREADS;
        done = rescore(documents.buf, n_documents, questions.buf, narrow, n_questions, dims, which_documents.buf,
                       which_questions.buf, n_pairs, exact.buf);
        Py_END_ALLOW_THREADS;
        if (!done) {
            PyErr_SetString(PyExc_IndexError, "_vector_kernel: a document or question index is out of range");
        }
    }
    Py_buffer *all[] = {&documents, &questions, &which_documents, &which_questions, &exact};
    release(all, sizeof(all) / sizeof(all[0]));
    if (!done) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"chunk_candidates", chunk_candidates, METH_VARARGS, chunk_candidates_doc},
    {"kept_best", kept_best, METH_VARARGS, kept_best_doc},
    {"rescored", rescored, METH_VARARGS, rescored_doc},
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
