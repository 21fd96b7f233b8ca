import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from adjpos.tasks import EOS, EOS_ID, PAD, PAD_ID, VOCAB, VOCAB_SIZE, decode, encode
from adjpos.tasks.vocab import check_text

OUTSIDE = st.characters(codec="utf-8").filter(lambda c: c not in VOCAB)


def test_vocabulary_is_unique_and_holds_pad_and_eos_at_their_ids():
    assert VOCAB_SIZE == len(VOCAB) == len(set(VOCAB))
    assert VOCAB[PAD_ID] == PAD and VOCAB[EOS_ID] == EOS and PAD != EOS


def test_keywords_and_symbols_are_in_the_vocabulary():
    for text in ("rev", "wherex", "ord", "+=(),", "0123456789"):
        assert set(text) <= set(VOCAB)


def test_encode_known_string_character_by_character():
    tokens = encode("rev(09)=1.")
    assert tokens.dtype == torch.int64
    assert tokens.tolist() == [21, 18, 22, 14, 2, 11, 15, 13, 3, 1]
    assert [VOCAB[i] for i in tokens.tolist()] == list("rev(09)=1.")


def test_digits_map_to_digit_plus_two():
    assert encode("0123456789").tolist() == list(range(2, 12))


def test_encode_empty_string():
    assert encode("").shape == (0,)
    assert decode(encode("")) == ""


@given(st.text(alphabet=VOCAB))
def test_decode_inverts_encode(text):
    assert decode(encode(text)) == text
    assert decode(encode(text).tolist()) == text


@given(st.text(alphabet=VOCAB), OUTSIDE, st.text(alphabet=VOCAB))
def test_character_outside_vocabulary_is_named(before, bad, after):
    with pytest.raises(ValueError, match="not in the vocabulary") as info:
        encode(before + bad + after)
    message = str(info.value)
    assert f"character {bad!r} at index {len(before)}" in message
    assert repr(VOCAB) in message


@pytest.mark.parametrize("bad", [-1, VOCAB_SIZE, 100])
def test_decode_rejects_ids_outside_vocabulary(bad):
    with pytest.raises(ValueError, match=f"ids run from 0 to {VOCAB_SIZE - 1}") as info:
        decode(torch.tensor([3, bad, 4]))
    assert str([bad]) in str(info.value)


def test_check_text_rejects_non_strings(user_errors):
    with pytest.raises(ValueError, match="must be a str"):
        check_text(123)
