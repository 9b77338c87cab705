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

   This file holds the Python bindings: each function's argument checks, the GIL released around
   the work, the buffers released; the work is _vector_scan.c's (the candidate pass, its AVX2 and
   AVX-512 clones, the float64 rescoring, whose IEEE semantics that file explains) and
   _vector_ranking.c's (the rounding and ranking). */

#include "_vector_kernel.h"

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
            found = vk_chunk_candidates(scores.buf, threshold.buf, floor.buf, margin.buf, best.buf, sizes.buf,
                                        n_questions, width, k, (int64_t)start, rows.buf, cols.buf, values.buf);
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
            Py_BEGIN_ALLOW_THREADS;
            vk_kept_best(best.buf, held, n_questions, k);
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
        Py_BEGIN_ALLOW_THREADS;
        done = vk_kept_counts(rows.buf, values.buf, threshold.buf, counts.buf, n_candidates, n_questions);
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
        done = vk_kept_rescored(rows.buf, cols.buf, values.buf, n_candidates, threshold.buf, positions.buf,
                                documents.buf, n_documents, questions.buf, narrow, n_questions, dims,
                                out_documents.buf, out_exact.buf, room);
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
            done = vk_ranked(documents.buf, exact.buf, start, lo, hi, k, scale, indices.buf, scores.buf,
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
    vk_init_dispatch();
    return PyModule_Create(&module);
}
