/* What crosses the files of the one extension module retrieval.methods.support._vector_kernel:
   _vector_scan.c (the candidate pass, each question's kept best, the counts and the float64
   rescoring, with their AVX2/AVX-512 clones), _vector_ranking.c (the rounding and ranking of each
   question's candidates) and _vector_kernel.c (the Python bindings). Only these vk_ names are not
   static, and they are hidden: the .so exports PyInit alone. */

#ifndef VECTOR_KERNEL_H
#define VECTOR_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__)
/* Forced inline: a body inlined into each dispatch clone is compiled for that clone's target. */
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

#if defined(__GNUC__)
/* Shared between the module's files, not exported from its .so (only PyInit is). */
#define VK_HIDDEN __attribute__((visibility("hidden")))
#else
#define VK_HIDDEN
#endif

/* Chooses the candidate pass's and the rescoring's clones for this CPU: once, at import. */
VK_HIDDEN void vk_init_dispatch(void);

/* The candidates of one chunk (_vector_scan.c, candidates_body); returns their count. */
VK_HIDDEN Py_ssize_t vk_chunk_candidates(const float *scores, float *threshold, const float *floor,
                                         const double *margin, float *best, int64_t *sizes, Py_ssize_t n_questions,
                                         Py_ssize_t width, Py_ssize_t k, int64_t start, int32_t *rows, int32_t *cols,
                                         float *values);

/* Each question's k largest of its sizes[q] held moved to its first k places, the rest -inf. */
VK_HIDDEN void vk_kept_best(float *best, int64_t *sizes, Py_ssize_t n_questions, Py_ssize_t k);

/* counts[q] += the candidates of question q that pass its threshold; 0 when a question index is
   out of range. */
VK_HIDDEN int vk_kept_counts(const int32_t *rows, const float *values, const float *threshold, int64_t *counts,
                             Py_ssize_t n_candidates, Py_ssize_t n_questions);

/* The kept candidates scored in float64 at their questions' places (_vector_scan.c, kept_body);
   0 when an index or a place is out of range. */
VK_HIDDEN int vk_kept_rescored(const int32_t *rows, const int32_t *cols, const float *values,
                               Py_ssize_t n_candidates, const float *threshold, int64_t *positions,
                               const float *documents, Py_ssize_t n_documents, const void *questions, int narrow,
                               Py_ssize_t n_questions, Py_ssize_t dims, int64_t *out_documents, double *out_exact,
                               Py_ssize_t room);

/* Questions lo..hi-1 rounded and ranked as top_k ranks them (_vector_ranking.c, ranked_body); 0
   when out of memory. */
VK_HIDDEN int vk_ranked(const int64_t *documents, const double *exact, const int64_t *starts, Py_ssize_t lo,
                        Py_ssize_t hi, Py_ssize_t k, double scale, int64_t *indices, double *scores,
                        int64_t *lengths);

#endif
