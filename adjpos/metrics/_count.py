"""Compiled core of the adjacency count: ordered and tied pairs in row prefixes, by merge sort.

For each row r with prefix length m = lengths[r], count #{(i, j): i < j < m, v[i] < v[j]}
(strict, so ties are not ordered) and #{(i, j): i < j < m, v[i] == v[j]}. A bottom-up merge
sort counts, while merging, how many left-run values are strictly below each right-run value;
the sorted prefix then holds equal values side by side, so the ties are counted by runs:
O(m log m) per row, rows in parallel.
"""

from typing import no_type_check

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
@no_type_check  # keeps the test-time type-check hook from wrapping compiled code
def _count_row(values, buf, tmp):  # pragma: no cover - compiled
    m = values.shape[0]
    for i in range(m):
        buf[i] = values[i]
    total = 0
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if buf[i] < buf[j]:  # strict: on a tie the right value goes first, uncounted
                    tmp[k] = buf[i]
                    i += 1
                else:
                    total += i - lo
                    tmp[k] = buf[j]
                    j += 1
                k += 1
            while i < mid:
                tmp[k] = buf[i]
                i += 1
                k += 1
            while j < hi:
                total += mid - lo
                tmp[k] = buf[j]
                j += 1
                k += 1
        buf, tmp = tmp, buf
        width *= 2
    tied = 0
    run = 1
    for i in range(1, m):  # equal values (0.0 and -0.0 too) sit side by side once sorted
        if buf[i] == buf[i - 1]:
            run += 1
        else:
            tied += run * (run - 1) // 2
            run = 1
    tied += run * (run - 1) // 2
    return total, tied


@numba.njit(parallel=True, cache=True)
@no_type_check
def count_ordered_pairs(values, lengths):  # pragma: no cover - compiled
    """values: [rows, n] float; lengths: [rows] int64 prefix lengths -> [rows, 2] int64 counts
    of the ordered and the tied pairs."""
    rows = values.shape[0]
    out = np.zeros((rows, 2), np.int64)
    for r in numba.prange(rows):
        m = lengths[r]
        if m >= 2:
            buf = np.empty(m, values.dtype)
            tmp = np.empty(m, values.dtype)
            ordered, tied = _count_row(values[r, :m], buf, tmp)
            out[r, 0] = ordered
            out[r, 1] = tied
    return out
