import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.metrics import adjacency_probability, adjacency_rows, states_precision, tie_tolerance
from reference import slow_adjacency_probability, slow_adjacency_rows, slow_tie_tolerance

BATCH_SHAPES = st.sampled_from([(), (3,), (2, 3)])
# Models produce float32; float64 is the precise path; half types are widened to float32.
DTYPES = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16])
# The precision that sets the tolerance: the matrices' own, or states' widened before.
PRECISIONS = st.sampled_from([None, torch.float32, torch.float64])
# Near-ties: moves of a value in machine epsilons of the precision, below, at and beyond the
# tolerance of 4 (a gap is the difference of two moves, so gaps land at every half step).
NUDGES = torch.tensor([0.0, 0.5, 1.0, 2.0, 3.5, 4.0, 4.5, 8.0])


@st.composite
def sim_and_lengths(draw, min_len=1, padded=None):
    """Random [*batch, n, n] matrices with ties and near-ties, n up to 64, lengths (always
    when `padded`) and the precision of the tie tolerance (None: the matrices' dtype).

    The values are k / levels for integers |k| <= levels, so with few levels every row prefix
    longer than 2 * levels + 1 holds ties (pigeonhole), and zeros come as both 0.0 and -0.0.
    Half the time each value is then moved by a few machine epsilons of the precision
    (`NUDGES`), so that tied values turn into pairs at, just inside and just beyond the
    tolerance.
    """
    batch = draw(BATCH_SHAPES)
    n = draw(st.integers(min_value=max(min_len, 1), max_value=64))
    dtype = draw(DTYPES)
    precision = draw(PRECISIONS)
    levels = draw(st.sampled_from([1, 2, 3, 1000]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    values = torch.randint(-levels, levels + 1, (*batch, n, n), generator=gen).to(dtype)
    signs = torch.randint(0, 2, values.shape, generator=gen).to(dtype) * 2 - 1
    sim = values * signs / levels  # 0.0 * -1.0 is -0.0, which must tie with 0.0
    if draw(st.booleans()):
        nudge = NUDGES[torch.randint(0, len(NUDGES), sim.shape, generator=gen)]
        nudge *= torch.randint(0, 2, sim.shape, generator=gen) * 2 - 1
        eps = torch.finfo(precision or dtype).eps
        sim = (sim.double() + nudge.double() * eps).to(dtype)
    if padded if padded is not None else draw(st.booleans()):
        lengths = torch.randint(min_len, n + 1, batch, generator=gen)
    else:
        lengths = None
    return sim, lengths, precision


def _flat(sim, lengths):
    n = sim.shape[-1]
    mats = sim.reshape(-1, n, n)
    lens = [n] * len(mats) if lengths is None else lengths.reshape(-1).tolist()
    return mats, lens


def _tol(sim, precision):
    return slow_tie_tolerance(sim.dtype if precision is None else precision)


def _assert_rows_match_reference(rows, sim, lengths, ties="strict", precision=None):
    """Both divide the same exact count by the same pair count, so they agree to the bit."""
    mats, lens = _flat(sim, lengths)
    tol = _tol(sim, precision)
    expected = torch.tensor(
        [slow_adjacency_rows(m.tolist(), L, ties, tol) for m, L in zip(mats, lens, strict=True)],
        dtype=torch.float64,
    )
    torch.testing.assert_close(
        rows.reshape(expected.shape), expected.to(sim.dtype), rtol=0, atol=0, equal_nan=True
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_tie_tolerance_is_four_epsilons_of_the_precision(dtype):
    assert tie_tolerance(dtype) == slow_tie_tolerance(dtype) == 4 * torch.finfo(dtype).eps
    with pytest.raises(ValueError, match="floating-point torch dtype"):
        adjacency_rows(torch.zeros(3, 3), precision=torch.int32)


@settings(max_examples=100, deadline=None)
@given(sim_and_lengths())
def test_rows_match_slow_reference(case):
    sim, lengths, precision = case
    rows = adjacency_rows(sim, lengths=lengths, precision=precision)
    assert rows.shape == sim.shape[:-1] and rows.dtype == sim.dtype
    _assert_rows_match_reference(rows, sim, lengths, precision=precision)


@settings(max_examples=100, deadline=None)
@given(sim_and_lengths(min_len=3))
def test_probability_matches_slow_reference(case):
    sim, lengths, precision = case
    score = adjacency_probability(sim, lengths=lengths, precision=precision)
    assert score.shape == sim.shape[:-2] and score.dtype == sim.dtype
    mats, lens = _flat(sim, lengths)
    tol = _tol(sim, precision)
    expected = torch.tensor(
        [
            slow_adjacency_probability(m.tolist(), L, tol=tol)
            for m, L in zip(mats, lens, strict=True)
        ],
        dtype=torch.float64,
    )
    # The mean over rows is taken in the input's dtype: its rounding is the only difference.
    torch.testing.assert_close(score.reshape(expected.shape), expected.to(sim.dtype))


@settings(max_examples=50, deadline=None)
@given(sim_and_lengths(min_len=3, padded=True), st.integers(0, 2**31 - 1))
def test_padding_is_ignored(case, seed):
    """Scoring with lengths equals scoring each truncated matrix alone, whatever the padding
    (here values that tie with the real ones, so reading any of them would change a count)."""
    sim, lengths, _ = case
    fill = torch.randint(-3, 4, sim.shape, generator=torch.Generator().manual_seed(seed))
    n = sim.shape[-1]
    pad = torch.arange(n) >= lengths[..., None]
    noisy = torch.where(pad[..., None, :] | pad[..., :, None], fill.to(sim.dtype) / 3, sim)
    mats, lens = _flat(noisy, lengths)
    alone = torch.stack([adjacency_probability(m[:L, :L]) for m, L in zip(mats, lens, strict=True)])
    together = adjacency_probability(noisy, lengths=lengths).reshape(-1)
    torch.testing.assert_close(together, alone)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_values_within_the_tolerance_tie_and_beyond_it_are_ordered(dtype):
    """Pairs at most `tie_tolerance` apart tie, pairs a little farther apart are ordered, in
    each dtype's own tolerance: a kernel that compared in a coarser type, exactly, or with
    another tolerance would get one of the two wrong."""
    n, tol = 12, tie_tolerance(dtype)
    base = torch.tensor(0.25, dtype=dtype)  # a power of two: base + tol is exact in every dtype
    for gap, ordered in ((tol / 2, False), (tol, False), (2 * tol, True)):
        rising = torch.where(torch.arange(n) % 2 == 1, base + gap, base).expand(n, n)
        rows = adjacency_rows(rising.contiguous())
        expected = slow_adjacency_rows(rising.tolist(), n, tol=tol)
        torch.testing.assert_close(rows, torch.tensor(expected, dtype=dtype), equal_nan=True)
        assert bool(rows[3] > 0) == ordered  # row 3 sees (base, base + gap, base)


def test_float32_states_widened_before_the_cosine_keep_float32_ties():
    """Cosines a float32 epsilon apart, as a rescaled float32 state gives, tie under the
    states' precision even where the cosines are held in float64."""
    eps = torch.finfo(torch.float32).eps
    row = torch.tensor([0.5, 0.5 + eps, 0.5 - eps, 0.9], dtype=torch.float64)
    sim = row.expand(4, 4).contiguous()
    assert float(adjacency_probability(sim, precision=torch.float32)) == 0.0  # all tied
    # float64's tolerance orders them: row 2 has its one pair ordered, row 3 one of three
    assert float(adjacency_probability(sim)) == pytest.approx((1 + 1 / 3) / 2)
    assert states_precision(torch.randn(3, 4).double()) == torch.float32
    assert states_precision(torch.randn(3, 4, dtype=torch.float64)) == torch.float64
    assert states_precision(torch.randn(3, 4).half()) == torch.float16


def test_known_extremes():
    n = 9
    i = torch.arange(n).float()
    rising = -(i[:, None] - i[None, :]).abs()  # similarity grows toward the diagonal
    assert float(adjacency_probability(rising)) == 1.0
    assert float(adjacency_probability(-rising)) == 0.0
    assert float(adjacency_probability(torch.ones(n, n))) == 0.0  # all ties: none ordered


def test_rows_undefined_are_nan():
    rows = adjacency_rows(torch.randn(2, 6, 6), lengths=torch.tensor([6, 4]))
    nan = torch.isnan(rows)
    assert nan[:, :2].all() and not nan[0, 2:].any()
    assert not nan[1, 2:4].any() and nan[1, 4:].all()


def test_large_matrix_matches_numpy_count():
    """A vectorised O(n^3) count on a 200-token matrix, a second independent check."""
    sim = torch.randn(200, 200, generator=torch.Generator().manual_seed(2)).double()
    s, tol = sim.numpy(), slow_tie_tolerance(torch.float64)
    expected = []
    for k in range(2, 200):
        v = s[k, :k]
        expected.append(np.triu(v[:, None] < v[None, :] - tol, 1).sum() / (k * (k - 1) / 2))
    torch.testing.assert_close(adjacency_rows(sim)[2:], torch.tensor(expected))


def test_the_first_call_leaves_torch_thread_count_alone():
    """Numba's OpenMP pool, started by the first kernel call in a process, shares libgomp with
    torch and reset its thread count: a sweep worker set to one thread then used them all."""
    code = (
        "import torch; torch.set_num_threads(1); import adjpos.metrics as m; "
        "m.adjacency_probability(torch.rand(2, 8, 8)); print(torch.get_num_threads())"
    )
    env = dict(os.environ, NUMBA_NUM_THREADS="2")  # a pool of 2 even on a one-core machine
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_the_kernel_uses_no_more_threads_than_torch_and_agrees_across_counts(monkeypatch):
    import numba

    import adjpos.metrics.adjacency as module

    used, original = [], module.count_ordered_pairs
    sim = torch.randint(0, 4, (16, 40, 40), generator=torch.Generator().manual_seed(3)).float()
    # Launch numba's thread pool first (its launch resets the OpenMP thread count torch reads),
    # and let it use every thread, whatever an earlier test in this process left it at.
    adjacency_rows(sim)
    numba_before = numba.get_num_threads()
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)

    def recording(values, prefix, tol):
        used.append(numba.get_num_threads())
        return original(values, prefix, tol)

    monkeypatch.setattr(module, "count_ordered_pairs", recording)
    before = torch.get_num_threads(), numba.get_num_threads()
    results = {}
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):  # 1, and all if more
            torch.set_num_threads(threads)
            try:
                results[threads] = adjacency_rows(sim)
            finally:
                torch.set_num_threads(before[0])
            assert used.pop() == threads
        assert (torch.get_num_threads(), numba.get_num_threads()) == before
    finally:
        numba.set_num_threads(numba_before)
    rows = list(results.values())
    torch.testing.assert_close(rows[0], rows[-1], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    ("sim", "lengths", "error", "match"),
    [
        (torch.zeros(3, 4), None, ValueError, "pos, pos"),
        (torch.zeros(5), None, ValueError, "pos, pos"),
        (torch.full((4, 4), float("nan")), None, ValueError, "NaN or inf"),
        (torch.zeros(4, 4, dtype=torch.long), None, TypeError, "floating-point"),
        (torch.zeros(2, 4, 4), torch.tensor([4]), ValueError, "batch shape"),
        (torch.zeros(2, 4, 4), torch.tensor([4, 5]), ValueError, r"\[1, 4\]"),
        (torch.zeros(2, 4, 4), torch.tensor([4, 0]), ValueError, r"\[1, 4\]"),
        (torch.zeros(2, 4, 4), torch.tensor([4.0, 3.0]), TypeError, "integer"),
        (torch.zeros(2, 4, 4), torch.tensor([4, 2]), ValueError, "shorter than 3"),
        (torch.zeros(2, 2), None, ValueError, "shorter than 3"),
    ],
)
@pytest.mark.usefixtures("user_errors")
def test_bad_input(sim, lengths, error, match):
    with pytest.raises(error, match=match):
        adjacency_probability(sim, lengths=lengths)


@settings(max_examples=100, deadline=None)
@given(sim_and_lengths())
def test_the_torch_count_gives_the_rows_of_the_slow_reference(case):
    """The count used on non-CPU devices, run here on the CPU through adjacency_rows: the
    compiled count is swapped for it, so ties, signed zeros and padding take the same path."""
    from adjpos.metrics import adjacency

    def torch_count(values, prefix, tol):
        return adjacency.count_pairs_torch(
            torch.from_numpy(values), torch.from_numpy(prefix), tol=tol
        ).numpy()

    sim, lengths, precision = case
    for ties in ("strict", "half"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(adjacency, "_count_pairs", torch_count)
            rows = adjacency_rows(sim, lengths=lengths, ties=ties, precision=precision)
        _assert_rows_match_reference(rows, sim, lengths, ties, precision)


def test_the_torch_count_bounds_its_memory_by_chunks():
    gen = torch.Generator().manual_seed(0)
    values = torch.randint(0, 5, (37, 20), generator=gen).float()
    prefix = torch.randint(0, 21, (37,), generator=gen)
    from adjpos.metrics.adjacency import _count_pairs, count_pairs_torch

    whole = count_pairs_torch(values, prefix, tol=0.5)
    assert torch.equal(count_pairs_torch(values, prefix, tol=0.5, chunk=400), whole)  # a row
    compiled = _count_pairs(values.double().numpy(), prefix.numpy(), 0.5)
    assert torch.equal(whole, torch.from_numpy(compiled))


def test_a_tensor_off_the_cpu_is_counted_where_it_is():
    """No copy to the host before counting: the torch count receives the device's tensor."""
    from adjpos.metrics import adjacency

    seen = []

    def spy(values, prefix, tol):
        seen.append((values.device.type, prefix.device.type))
        return torch.zeros(values.shape[0], dtype=torch.int64)

    values = torch.empty(12, 6, device="meta")  # a device that is not the CPU
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(adjacency, "count_pairs_torch", spy)
        counts = adjacency._count(values, torch.full((12,), 6), 0.0)
    assert seen == [("meta", "meta")] and counts.device.type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rows_equal_cpu_rows():
    sim = torch.randint(-3, 4, (4, 50, 50), generator=torch.Generator().manual_seed(0)).float()
    lengths = torch.tensor([50, 3, 17, 40])
    on_gpu = adjacency_rows(sim.cuda(), lengths=lengths.cuda())
    assert on_gpu.device.type == "cuda"
    torch.testing.assert_close(on_gpu.cpu(), adjacency_rows(sim, lengths=lengths), equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(sim_and_lengths())
def test_ties_as_half_match_the_slow_reference(case):
    sim, lengths, precision = case
    # Counts of half-pairs are exact in float64 and in the input's dtype at these sizes.
    rows = adjacency_rows(sim, lengths=lengths, ties="half", precision=precision)
    _assert_rows_match_reference(rows, sim, lengths, "half", precision)


def test_ties_as_half_put_chance_at_one_half():
    """All ties (every earlier token the same): strict scores 0, half scores exactly 0.5;
    without ties the two agree."""
    tied = torch.ones(12, 12)
    assert adjacency_probability(tied) == 0.0
    assert adjacency_probability(tied, ties="half") == 0.5
    distinct = torch.rand(3, 12, 12, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(
        adjacency_probability(distinct, ties="half"), adjacency_probability(distinct)
    )
    with pytest.raises(
        ValueError, match=r"ties='loose' is not allowed; choose from \['strict', 'half'\]"
    ):
        adjacency_rows(tied, ties="loose")
