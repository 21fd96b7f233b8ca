"""Slow, obviously-correct references for the metrics (loops straight from PAPER.md)."""

import math

# The tie tolerance of each dtype, written out: 4 machine epsilons (2 ** -mantissa bits). Two
# similarities at most this far apart are a tie.
TIE_TOLERANCE = {
    "float64": 4 * 2.0**-52,
    "float32": 4 * 2.0**-23,
    "float16": 4 * 2.0**-10,
    "bfloat16": 4 * 2.0**-7,
}


def slow_tie_tolerance(dtype):
    """The tolerance of a torch dtype (or its name), from the table above."""
    return TIE_TOLERANCE[str(dtype).removeprefix("torch.")]


def slow_adjacency_rows(sim, length, ties="strict", tol=0.0):
    """s_k for one [n, n] matrix (nested lists or tensor), NaN where undefined. A pair i < j
    is ordered when sim[k][i] < sim[k][j] - tol and tied when it is neither that nor
    sim[k][i] > sim[k][j] + tol; with ties="half" a tied pair counts one half."""
    n = len(sim)
    rows = [math.nan] * n
    for k in range(2, length):
        ordered = 0.0
        for j in range(k):
            for i in range(j):
                earlier, later = float(sim[k][i]), float(sim[k][j])
                if earlier < later - tol:
                    ordered += 1
                elif ties == "half" and not earlier > later + tol:
                    ordered += 0.5
        rows[k] = ordered / (k * (k - 1) / 2)
    return rows


def slow_adjacency_probability(sim, length, ties="strict", tol=0.0):
    defined = [s for s in slow_adjacency_rows(sim, length, ties, tol) if not math.isnan(s)]
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


def slow_decompose(states, lengths):
    """mean, position, context, residual of [batch][pos][d] nested lists, each entry summed
    one at a time (Song and Zhong's mean effects over the valid entries t < lengths[c])."""
    batch, n, d = len(states), len(states[0]), len(states[0][0])
    entries = [(c, t) for c in range(batch) for t in range(lengths[c])]

    def average(vectors):
        vectors = list(vectors)
        return [sum(v[i] for v in vectors) / len(vectors) for i in range(d)]

    def minus(a, *others):
        return [a[i] - sum(o[i] for o in others) for i in range(d)]

    mean = average(states[c][t] for c, t in entries)
    position = [[0.0] * d for _ in range(n)]
    for t in range(n):
        reaching = [c for c in range(batch) if t < lengths[c]]
        if reaching:
            position[t] = average(minus(states[c][t], mean) for c in reaching)
    context = [
        average(minus(states[c][t], mean, position[t]) for t in range(lengths[c]))
        for c in range(batch)
    ]
    residual = [
        [
            minus(states[c][t], mean, position[t], context[c]) if t < lengths[c] else [0.0] * d
            for t in range(n)
        ]
        for c in range(batch)
    ]
    return mean, position, context, residual


def slow_position_curves(prompts, min_fit):
    """{L: [L][d]} each length's position curve, loop by loop: every token's mean state over
    the prompts of every length, then for each length the mean over its prompts of the state
    minus its token's mean at each position, less the mean of those over positions
    (lengths with fewer than `min_fit` prompts left out). `prompts`: {L: (states [n][L][d],
    tokens [n][L])} as nested lists."""
    sums, counts = {}, {}
    for states, tokens in prompts.values():
        for row, ids in zip(states, tokens, strict=True):
            for state, token in zip(row, ids, strict=True):
                total = sums.setdefault(token, [0.0] * len(state))
                for i, value in enumerate(state):
                    total[i] += value
                counts[token] = counts.get(token, 0) + 1
    means = {t: [v / counts[t] for v in total] for t, total in sums.items()}
    curves = {}
    for length, (states, tokens) in prompts.items():
        if len(states) < min_fit:
            continue
        d = len(states[0][0])
        at = [[0.0] * d for _ in range(length)]
        for row, ids in zip(states, tokens, strict=True):
            for t in range(length):
                for i in range(d):
                    at[t][i] += (row[t][i] - means[ids[t]][i]) / len(states)
        centre = [sum(at[t][i] for t in range(length)) / length for i in range(d)]
        curves[length] = [[at[t][i] - centre[i] for i in range(d)] for t in range(length)]
    return curves
