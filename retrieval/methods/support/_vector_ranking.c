/* Each question's final candidates rounded as numpy rounds and ranked as
   retrieval.run.ranking.top_k ranks them (part of retrieval.methods.support._vector_kernel;
   _vector_kernel.c binds it to Python). The rounding keeps IEEE semantics as the build does (no
   -ffast-math): `rounded` relies on the additions below being carried out as written. */

#include "_vector_kernel.h"

#include <stdlib.h>
#include <string.h>

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
int vk_ranked(const int64_t *documents, const double *exact, const int64_t *starts, Py_ssize_t lo, Py_ssize_t hi,
              Py_ssize_t k, double scale, int64_t *indices, double *scores, int64_t *lengths) {
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