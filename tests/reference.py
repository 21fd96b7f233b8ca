"""Slow, obviously-correct references for the metrics (loops straight from PAPER.md)."""

import math


def slow_adjacency_rows(sim, length, ties="strict"):
    """s_k for one [n, n] matrix (nested lists or tensor), NaN where undefined; with
    ties="half" a tied pair counts one half."""
    n = len(sim)
    rows = [math.nan] * n
    for k in range(2, length):
        ordered = 0.0
        for j in range(k):
            for i in range(j):
                if float(sim[k][i]) < float(sim[k][j]):
                    ordered += 1
                elif ties == "half" and float(sim[k][i]) == float(sim[k][j]):
                    ordered += 0.5
        rows[k] = ordered / (k * (k - 1) / 2)
    return rows


def slow_adjacency_probability(sim, length, ties="strict"):
    defined = [s for s in slow_adjacency_rows(sim, length, ties) if not math.isnan(s)]
    return sum(defined) / len(defined)


def slow_cosine(x):
    """Cosine matrix of one [n, d] list-of-rows, zero vectors giving 0."""
    norms = [math.sqrt(sum(v * v for v in row)) for row in x]
    return [
        [
            0.0
            if norms[i] == 0 or norms[j] == 0
            else sum(a * b for a, b in zip(x[i], x[j], strict=True)) / (norms[i] * norms[j])
            for j in range(len(x))
        ]
        for i in range(len(x))
    ]
