"""Tidy tables: declared types survive a write and a read, on random data (hypothesis)."""

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adjpos.models import ModelConfig
from adjpos.tables import Table, config_table

SCORES = Table(name="string", layer="int64", seed="Int64", value="float64", flag="boolean")

rows = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.one_of(
                st.none(),
                # text a file can hold: no line breaks, no lone surrogates (not UTF-8)
                st.text(
                    st.characters(exclude_characters="\r\n", exclude_categories=("Cs",)),
                    max_size=8,
                ),
            ),
            "layer": st.integers(-(2**40), 2**40),
            "seed": st.one_of(st.none(), st.integers(0, 2**31)),
            "value": st.floats(allow_nan=False, width=64),
            "flag": st.one_of(st.none(), st.booleans()),
        }
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_every_value_and_type_round_trips(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("t") / "t.csv"
    written = SCORES.write(path, data)
    read = SCORES.read(path)
    assert read.dtypes.astype(str).tolist() == ["string", "int64", "Int64", "float64", "boolean"]
    for column in SCORES.names:
        for a, b in zip(written[column], read[column], strict=True):
            assert (pd.isna(a) and pd.isna(b)) or a == b or (math.isinf(a) and a == b)


def test_an_empty_string_is_missing_before_and_after_the_file(tmp_path):
    frame = SCORES.write(
        tmp_path / "t.csv", [{"name": "", "layer": 1, "seed": 2, "value": 0.5, "flag": True}]
    )
    assert pd.isna(frame.loc[0, "name"]) and pd.isna(SCORES.read(tmp_path / "t.csv").loc[0, "name"])


def test_strings_that_look_like_numbers_stay_strings(tmp_path):
    SCORES.write(
        tmp_path / "t.csv", [{"name": "007", "layer": 1, "seed": 2, "value": 0.5, "flag": True}]
    )
    assert SCORES.read(tmp_path / "t.csv").loc[0, "name"] == "007"


def test_wrong_columns_and_values_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"missing \['flag'\], unexpected \['extra'\]"):
        SCORES.frame([{"name": "a", "layer": 1, "seed": 1, "value": 0.1, "extra": 2}])
    with pytest.raises(ValueError, match="does not fit its column type"):
        SCORES.frame([{"name": "a", "layer": "one", "seed": 1, "value": 0.1, "flag": True}])
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"has columns \['a', 'b'\]; expected"):
        SCORES.read(tmp_path / "other.csv")
    with pytest.raises(ValueError, match="not allowed"):
        Table(x="object")
    with pytest.raises(ValueError, match="'name' holds a line break"):
        SCORES.frame([{"name": "a\rb", "layer": 1, "seed": 1, "value": 0.1, "flag": True}])


def test_config_columns_take_the_types_of_the_config_fields():
    table = config_table(ModelConfig, ["init_range", "d_model", "normalization_type", "attn_only"])
    assert table.columns == {
        "init_range": "float64",
        "d_model": "Int64",
        "normalization_type": "string",
        "attn_only": "boolean",
    }
