"""The intervention table: each intervention named once, every spec builds what it says, the
draws depend on the seed, and your own intervention runs through `intervene` and the runner."""

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from adjpos import build_model
from adjpos.interventions import (
    NAMES,
    SPECS,
    TEXT_TABLE,
    Dose,
    Fitted,
    InterventionSpec,
    NormPermute,
    SubspaceSwap,
    intervene,
    text_intervention_table,
)
from adjpos.interventions.curve.arms import ARMS
from adjpos.interventions.specs import _norm_specs, plan_units
from factories import tiny_config

PACKAGE = Path(__file__).resolve().parents[2] / "adjpos"


def _strings(path):
    tree = ast.parse(path.read_text())
    return [node for node in ast.walk(tree) if isinstance(node, ast.Constant)]


def test_each_intervention_is_defined_once_in_the_table():
    """No module of the library but the table spells an intervention's name, and the table
    defines each name in one spec (other mentions there are its references: control,
    matched_to), the position curve's arms one each from a row of the arm table, the norm
    permutation's family from one function, plain and mirrored."""
    spelled = {}
    paths = [*(PACKAGE / "interventions").rglob("*.py"), PACKAGE / "cli" / "intervene.py"]
    for path in [*paths, PACKAGE / "figures" / "interventions.py"]:
        if path.name != "specs.py":
            names = {n.value for n in _strings(path) if n.value in SPECS}
            if path.name == "spec.py":  # a spec's default control: the baseline
                names -= {"none"}
            if names:
                spelled[path.name] = names
    assert spelled == {}
    tree = ast.parse((PACKAGE / "interventions" / "specs.py").read_text())
    defined = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "InterventionSpec"
        and isinstance(node.args[0], ast.Constant)
    ]
    defined += [f"position_{name}" for name in ARMS]
    defined += [spec.name for m in (False, True) for spec in _norm_specs(mirrored=m)]
    assert sorted(defined) == sorted(NAMES) and len(defined) == len(set(defined))


def test_the_table_refers_only_to_its_own_entries():
    for spec in SPECS.values():
        assert spec.control in SPECS and spec.matched_to in (None, *SPECS.values())
        if spec.matched_to is not None:
            assert spec.matched_to.fitted_on == spec.fitted_on
        if spec.role == "tested" and spec.control != "none":
            assert SPECS[spec.control].role == "control"
    assert [n for n, s in SPECS.items() if s.role == "baseline"] == ["none"]


def _positional_states(n=600, d=12, n_pos=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    positions = torch.arange(n) % n_pos
    states = torch.randn(n, d, generator=gen, dtype=torch.float64)
    states[:, 0] += 2.0 * positions.double()
    return states, positions


def _prompt_states(d=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 5, (6, 8), generator=gen)
    curve = torch.arange(8, dtype=torch.float64)[:, None] * torch.ones(d, dtype=torch.float64)
    states = torch.randn(6, 8, d, generator=gen, dtype=torch.float64) + 0.3 * curve
    return {8: (states, tokens)}


def _fitted(seed=0):
    states, positions = _positional_states()
    prompts = _prompt_states()
    return Fitted(
        12,
        seed=seed,
        rank=2,
        states=states,
        positions=positions,
        prompts=prompts,
        counts={8: 6},
        runs_of=lambda tokens: RUNS,
    )


RUNS = ((0, 6),)  # the run of the prompts above: a position curve's arm acts on it


def _act(built, resid):
    """`built` on the positions before a read-out (a curve arm: told the prompts' runs)."""
    built = built.at(RUNS) if hasattr(built, "at") else built
    return built(resid, readout=torch.zeros(resid.shape[1], dtype=torch.bool))


def _dose(name):
    """What building `name` needs besides the fitted: a dosed spec's dose (size 1)."""
    spec = SPECS[name]
    return {"dose": Dose(1, 1 if "offsets" in spec.params else None)} if spec.dosed else {}


@pytest.mark.parametrize("name", NAMES)
def test_every_spec_builds_an_intervention_at_its_site(name):
    spec = SPECS[name]
    built = spec.build(_fitted(), **_dose(name))
    assert built.site == spec.site
    if spec.site == "resid_pre" and spec.role != "baseline":
        resid = _prompt_states()[8][0][:, :7]  # the positions before a read-out at 7
        changed = _act(built, resid)
        assert changed.shape == resid.shape and not torch.allclose(changed, resid)


def _seeded_change(name, seed, draw=0):
    resid = _prompt_states(seed=3)[8][0][:, :7]
    built = SPECS[name].build(_fitted(seed), draw=draw, **_dose(name))
    return _act(built, resid)


@pytest.mark.parametrize("name", [n for n, s in SPECS.items() if s.drawn])
def test_the_draws_of_a_random_control_depend_on_the_draw_and_the_seed(name):
    first = _seeded_change(name, seed=0)
    torch.testing.assert_close(_seeded_change(name, seed=0), first)  # each draw is fixed
    assert not torch.allclose(_seeded_change(name, seed=0, draw=1), first)
    assert not torch.allclose(_seeded_change(name, seed=1), first)


@pytest.mark.parametrize("name", ["norm_permute", "subspace_swap", "leace_random"])
def test_the_seeded_interventions_depend_on_the_seed(name):
    assert not torch.allclose(_seeded_change(name, seed=0), _seeded_change(name, seed=1))


@dataclass(frozen=True)
class Shift:
    """A user's own intervention: every state moved by `size` along the first axis."""

    size: float = 1.0
    site = "resid_pre"

    def __call__(self, acts, readout=None):
        return acts + torch.nn.functional.one_hot(torch.tensor(0), acts.shape[-1]) * self.size


def _model():
    return build_model(tiny_config(n_layers=2, d_model=32, n_heads=4, dtype="float64"))


def _written(model, tokens, site="blocks.1.hook_resid_pre"):
    """The states block 1 reads (a hook added after an intervention's sees what it wrote)."""
    return model.run_with_cache(tokens, names_filter=[site])[1][site]


def _shifts(fitted, *, size, **_):
    return Shift(size=size)


def test_your_own_intervention_runs_through_intervene_and_the_runner():
    model = _model()
    tokens = torch.randint(0, 20, (8, 12), generator=torch.Generator().manual_seed(0))
    clean = _written(model, tokens)
    with intervene(model, Shift(2.0), layer=1, readout_from=6, keep_readout=True):
        moved = _written(model, tokens)
    torch.testing.assert_close(moved[:, :6, 0], clean[:, :6, 0] + 2.0)
    torch.testing.assert_close(moved[:, 6:], clean[:, 6:])
    # one spec entry and its factory: a family by its params, compared with the baseline
    mine = [
        InterventionSpec(f"shift_{size}", f"shifted by {size}", _shifts, params={"size": size})
        for size in (1.0, 4.0)
    ]
    table = text_intervention_table(model, tokens, layers=[1], interventions=["none", *mine])
    assert list(table.columns) == TEXT_TABLE.names
    rows = table.set_index("intervention")
    assert list(rows.index) == ["none", "shift_1.0", "shift_4.0"]
    assert set(rows.loc[["shift_1.0", "shift_4.0"], "control"]) == {"none"}
    for name in ("shift_1.0", "shift_4.0"):
        row = rows.loc[name]
        assert row.loss_difference == pytest.approx(row.loss - rows.loc["none", "loss"])
        assert row.perturbation > 0
    assert rows.loc["shift_4.0", "perturbation"] > rows.loc["shift_1.0", "perturbation"]


@pytest.mark.usefixtures("user_errors")
def test_what_is_not_an_intervention_or_a_spec_is_named():
    model = _model()
    with pytest.raises(ValueError, match="is not an intervention: pass an object with .site"):
        with intervene(model, lambda acts, readout=None: acts, layer=1):
            pass
    with pytest.raises(ValueError, match=r"interventions: unknown \['shuffle'\]; choose from"):
        plan_units(model, [1], ["none", "shuffle"], ["kept"], 1)
    with pytest.raises(ValueError, match="none given or repeated"):
        plan_units(model, [1], ["none", SPECS["none"]], ["kept"], 1)
    with pytest.raises(ValueError, match=r"mine: role='judged'; choose from"):
        InterventionSpec("mine", "mine", _shifts, role="judged")
    with pytest.raises(ValueError, match=r"mine: readouts \('last',\)"):
        InterventionSpec("mine", "mine", _shifts, readouts=("last",))


@pytest.mark.parametrize("mirrored", [False, True])
def test_with_the_readout_kept_the_norms_move_among_the_prompt_positions_only(mirrored):
    """No prompt position takes the read-out's norm, and the mirror is k -> r - 1 - k over the
    r positions before the read-out."""
    model, start = _model(), 6
    tokens = torch.randint(0, 20, (5, 10), generator=torch.Generator().manual_seed(4))
    clean = _written(model, tokens).norm(dim=-1)
    permute = NormPermute(seed=2, mirrored=mirrored)
    with intervene(model, permute, layer=1, readout_from=start, keep_readout=True):
        kept = _written(model, tokens).norm(dim=-1)
    before, after = clean[:, :start], kept[:, :start]
    torch.testing.assert_close(after.sort(dim=1).values, before.sort(dim=1).values)
    torch.testing.assert_close(kept[:, start:], clean[:, start:])
    if mirrored:
        torch.testing.assert_close(after, before.flip(dims=[1]))


def test_with_the_readout_kept_the_subspace_moves_among_the_prompt_positions_only():
    """A swap of the whole space moves each prompt state's direction to another prompt
    position; none takes the read-out's."""
    model, start = _model(), 5
    tokens = torch.randint(0, 20, (4, 9), generator=torch.Generator().manual_seed(6))
    swap = SubspaceSwap(basis=torch.eye(32, dtype=torch.float64), seed=1)
    clean = _written(model, tokens)
    with intervene(model, swap, layer=1, readout_from=start, keep_readout=True):
        kept = _written(model, tokens)

    def unit(x):
        return x / x.norm(dim=-1, keepdim=True)

    cos = torch.einsum("bkd,bjd->bkj", unit(kept[:, :start]), unit(clean))  # [b, start, 9]
    best = cos.argmax(dim=-1)
    assert bool((best < start).all())  # each took a prompt position's direction
    torch.testing.assert_close(cos.amax(dim=-1), torch.ones_like(cos[..., 0]))
    assert sorted(best[0].tolist()) == list(range(start))  # a permutation of them
