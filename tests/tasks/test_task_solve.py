"""solve() against slow independent references, on hypothesis-generated valid prompts."""

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from adjpos.tasks import get_task

DIGITS = "0123456789"
SETTINGS = settings(deadline=None, max_examples=200)


@st.composite
def operands(draw, max_digits=4):
    count = draw(st.integers(1, max_digits))
    if count == 1:
        return draw(st.sampled_from(DIGITS))
    lead = draw(st.sampled_from(DIGITS[1:]))
    return lead + draw(st.text(alphabet=DIGITS, min_size=count - 1, max_size=count - 1))


@SETTINGS
@given(a=operands(), b=operands())
def test_addition_matches_schoolbook(reference, a, b):
    task = get_task("addition")
    prompt = f"{a}+{b}="
    assume(len(prompt) <= task.max_prompt_len)  # 4 + 4 digits do not fit (test_task_errors)
    assert task.solve(prompt) == reference.add_digits(a, b)


@SETTINGS
@given(a=operands(max_digits=12), b=operands(max_digits=12))
def test_wide_addition_matches_schoolbook(reference, a, b):
    task = get_task("addition", max_digits=12, max_prompt_len=26)
    assert task.solve(f"{a}+{b}=") == reference.add_digits(a, b)


@SETTINGS
@given(digits=st.text(alphabet=DIGITS, min_size=1, max_size=16))
def test_reversal_matches_loop(reference, digits):
    assert get_task("reversal").solve(f"rev({digits})=") == reference.reverse_digits(digits)


@SETTINGS
@given(digits=st.text(alphabet=DIGITS, min_size=1, max_size=9), data=st.data())
def test_indexing_matches_scan(reference, digits, data):
    query = data.draw(st.sampled_from(digits))
    answer = get_task("indexing").solve(f"wherex({digits},{query})=")
    assert answer == reference.first_index(digits, query)


@SETTINGS
@given(shuffled=st.permutations(DIGITS), count=st.integers(1, 5), data=st.data())
def test_ordering_matches_lookup(reference, shuffled, count, data):
    original = "".join(shuffled[:count])
    reordered = "".join(data.draw(st.permutations(original)))
    answer = get_task("ordering").solve(f"ord({original},{reordered})=")
    assert answer == reference.order_indices(original, reordered)
    assert sorted(answer) == [str(i) for i in range(count)]
    assert "".join(original[int(i)] for i in answer) == reordered


def test_reference_addition_known_values(reference):
    assert reference.add_digits("999", "1") == "1000"
    assert reference.add_digits("0", "0") == "0"
    assert reference.add_digits("123", "456") == "579"
