"""Compiled core of the adjacency count: ordered and tied pairs in row prefixes, by merge sort.

For each row r with prefix length m = lengths[r] and a tolerance t >= 0, a pair i < j < m is
ordered when v[i] < v[j] - t, reversed when v[i] > v[j] + t, and tied otherwise. A bottom-up
merge sort counts, while merging, how many left-run values (all earlier) lie below and above
each right-run value's window [v - t, v + t], two pointers walking each sorted left run once;
the tied pairs are the rest. O(m log m) per row, rows in parallel."""

from typing import no_type_check

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
@no_type_check  # keeps the test-time type-check hook from wrapping compiled code
def _count_row(values, tol, buf, tmp):  # pragma: no cover - compiled
    m = values.shape[0]
    for i in range(m):
        buf[i] = values[i]
    below = 0  # pairs i < j with v[i] < v[j] - tol: ordered
    above = 0  # pairs i < j with v[i] > v[j] + tol: reversed
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            i, k, p, q = lo, lo, lo, lo
            for j in range(mid, hi):
                b = buf[j]
                while i < mid and buf[i] <= b:  # the left values up to b go first
                    tmp[k] = buf[i]
                    i += 1
                    k += 1
                # the window's ends rise with b; below b - tol lies below b, so p <= i <= q
                while p < i and buf[p] < b - tol:
                    p += 1
                q = max(q, i)
                while q < mid and buf[q] <= b + tol:
                    q += 1
                below += p - lo
                above += mid - q
                tmp[k] = b
                k += 1
            while i < mid:
                tmp[k] = buf[i]
                i += 1
                k += 1
        buf, tmp = tmp, buf
        width *= 2
    return below, m * (m - 1) // 2 - below - above


@numba.njit(parallel=True, cache=True)
@no_type_check
def count_ordered_pairs(values, lengths, tol):  # pragma: no cover - compiled
    """values: [rows, n] float64; lengths: [rows] int64 prefix lengths; tol: float >= 0 ->
    [rows, 2] int64 counts of the ordered and the tied pairs."""
    rows = values.shape[0]
    out = np.zeros((rows, 2), np.int64)
    for r in numba.prange(rows):
        m = lengths[r]
        if m >= 2:
            buf = np.empty(m, values.dtype)
            tmp = np.empty(m, values.dtype)
            ordered, tied = _count_row(values[r, :m], tol, buf, tmp)
            out[r, 0] = ordered
            out[r, 1] = tied
    return out
