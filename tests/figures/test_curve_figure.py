"""The arms figure: one legend entry per arm family, each family's line at its seeds' mean per
dose, each control's bar spanning its seeds' intervals, the readings under their panel."""

import numpy as np
import pandas as pd
import pytest

from adjpos.figures.curve import family, plot_curve_arms
from adjpos.validation import UsageError

ARMS = {1: ["shift+1", "shift-1", "scatter", "rotate", "edges", "random", "edges_random"]}
ARMS[2] = ["shift+2", "shift-2", "scatter", "rotate", "random"]


def _rows(seed=0):
    gen = np.random.default_rng(seed)
    rows = []
    for task in ("reversal", "indexing"):
        for layer in (1, 2):
            for s in (0, 1, 2):
                for dose, arms in ARMS.items():
                    for arm in arms:
                        em = float(gen.uniform(0.1, 0.9))
                        size = 0.1 * dose + 0.01 * s + (0.4 if "edges" in arm else 0.0)
                        rows.append(dict(task=task, layer=layer, seed=s, arm=arm, dose=dose))
                        rows[-1] |= dict(size_target=size, exact_match=em)
                        rows[-1] |= dict(exact_match_low=em - 0.05, exact_match_high=em + 0.04)
    rows.append(dict(task="reversal", layer=1, seed=0, arm=None, dose=None))  # no arm: left out
    return pd.DataFrame(rows)


def test_family_names_the_shifts_by_sign():
    assert [family(a) for a in ("shift+1", "shift+12", "shift-3", "rotate")] == [
        "shift +k",
        "shift +k",
        "shift -k",
        "rotate",
    ]


def test_each_family_is_one_line_at_its_seeds_mean_and_each_control_spans_its_seeds():
    rows = _rows()
    readings = {("reversal", 1): ["size 0.10: address F3", "size 0.20: address W3"]}
    fig = plot_curve_arms(rows, readings=readings)
    legend = [t.name for t in fig.data if t.showlegend]
    assert legend == [
        "shift +k",
        "shift -k",
        "scatter",
        "rotate",
        "edges",
        "random control",
        "edges' random control",
    ]
    lines = [t for t in fig.data if t.name and t.xaxis == "x" and t.yaxis == "y"]  # reversal, 1
    here = rows[(rows["task"] == "reversal") & (rows["layer"] == 1)].dropna(subset=["arm"])
    controls = {"random control": "random", "edges' random control": "edges_random"}
    for trace in lines:
        arm = controls.get(trace.name)
        mine = here[[a == arm or family(a) == trace.name for a in here["arm"]]]
        by_dose = mine.groupby("dose")
        np.testing.assert_allclose(trace.y, by_dose["exact_match"].mean())
        if trace.error_y.array is not None:  # a control: from its lowest low to highest high
            top = np.asarray(trace.y) + np.asarray(trace.error_y.array)
            bottom = np.asarray(trace.y) - np.asarray(trace.error_y.arrayminus)
            np.testing.assert_allclose(top, by_dose["exact_match_high"].max())
            np.testing.assert_allclose(bottom, by_dose["exact_match_low"].min())
    points = [t for t in fig.data if not t.name and t.xaxis == "x"]
    assert sum(len(t.y) for t in points) == len(here[~here["arm"].str.contains("random")])
    (note,) = [a for a in fig.layout.annotations if "address" in a.text]
    assert note.text == "<br>".join(readings[("reversal", 1)]) and note.xref == "x domain"


def test_bad_rows_get_a_clear_error():
    with pytest.raises(UsageError, match="lack columns"):
        plot_curve_arms(_rows().drop(columns="size_target"))
    with pytest.raises(UsageError, match="no arm rows"):
        plot_curve_arms(_rows().assign(arm=None))


def test_an_arm_that_reached_its_size_on_no_prompt_is_not_drawn():
    rows = _rows().assign(unreached_share=0.0)
    scatter = rows["arm"] == "scatter"
    drawn = plot_curve_arms(rows)
    assert "scatter" in {t.name for t in drawn.data}
    rows.loc[scatter, "unreached_share"] = 1.0
    assert "scatter" not in {t.name for t in plot_curve_arms(rows).data}
    rows.loc[scatter & (rows["dose"] == 1), "unreached_share"] = 0.4  # compared on 60%
    kept = [t for t in plot_curve_arms(rows).data if t.name == "scatter"]
    assert kept and all(len(t.x) <= 3 for t in kept)  # one size: its seeds, no line through two


def test_a_size_added_to_one_seed_is_a_point_off_the_mean_lines():
    """A size only seed 0 ran (added where too few were measurable): no mean line passes
    through it; the arm's seed point and the control's own point and interval are drawn."""
    rows = _rows()
    extra = rows[(rows["seed"] == 0) & (rows["dose"] == 1)].assign(dose=0.75)
    extra = extra[~extra["arm"].str.startswith("edges")]  # built whole: never added
    extra["size_target"] = extra["size_target"] * 0.75
    fig = plot_curve_arms(pd.concat([rows, extra], ignore_index=True))
    panel = [t for t in fig.data if t.xaxis == "x" and t.yaxis == "y"]  # reversal, layer 1
    lines = [t for t in panel if t.name and "lines" in (t.mode or "")]
    assert lines and all(len(t.x) <= 2 for t in lines)  # doses 1 and 2 at most: not 0.75
    added = extra[(extra["task"] == "reversal") & (extra["layer"] == 1)]
    random = added[added["arm"] == "random"].iloc[0]
    own = [t for t in panel if not t.name and t.error_y.array is not None]
    assert [list(t.y) for t in own] == [[random["exact_match"]]]
    assert list(own[0].error_y.array) == pytest.approx([0.04])
    points = [t for t in panel if not t.name and t.error_y.array is None]
    here = rows[(rows["task"] == "reversal") & (rows["layer"] == 1)].dropna(subset=["arm"])
    tested = pd.concat([here, added])
    assert sum(len(t.y) for t in points) == (~tested["arm"].str.contains("random")).sum()
