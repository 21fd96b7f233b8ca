"""The byte-level BPE tokenizer: any text round-trips, the fast piecewise encoding equals one
plain `encode` call (on random texts, whitespace runs included), and a saved tokenizer gives
the same ids."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adjpos.text.tokenizer import encode_text, load_tokenizer, save_tokenizer, train_tokenizer

TEXT = "KING:\nWho's there?\n\nQUEEN:\nNay, answer me: stand, and unfold yourself.\n\n" * 40


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXT, 300)


# Texts made of words, punctuation and whitespace runs (blank lines, spaces before newlines).
pieces = st.sampled_from(
    ["KING", "who", "'s", " ", "  ", "\n", "\n\n", "\n \n", "\t", ",", "é", "7"]
)
texts = st.lists(pieces, max_size=40).map("".join) | st.text(max_size=60)


@given(text=texts)
def test_piecewise_encoding_equals_one_encode_call(tokenizer, text):
    assert encode_text(tokenizer, text) == tokenizer.encode(text).ids


@given(text=texts)
def test_any_text_round_trips(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text).ids) == text


def test_training_is_deterministic_and_sized(tokenizer):
    again = train_tokenizer(TEXT, 300)
    assert again.get_vocab() == tokenizer.get_vocab()
    assert tokenizer.get_vocab_size() == 300
    assert len(tokenizer.encode("KING:\nWho's there?").ids) < len("KING:\nWho's there?")


def test_saved_tokenizer_loads_as_a_transformers_tokenizer(tokenizer, tmp_path):
    path = save_tokenizer(tokenizer, tmp_path)
    assert path == tmp_path / "tokenizer.json"
    loaded = load_tokenizer(tmp_path)
    text = "QUEEN:\nStand, and unfold yourself, Ophélie.\n\nKING:\nHo!"
    ids = tokenizer.encode(text).ids
    assert loaded(text)["input_ids"] == ids
    assert encode_text(loaded, text) == ids
    assert loaded.decode(ids) == text
    assert load_tokenizer(path).vocab_size == 300


@pytest.mark.usefixtures("user_errors")
def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="at least 257"):
        train_tokenizer(TEXT, 100)
    with pytest.raises(ValueError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
