"""`StudySizes`: every size of the study, and its presets: `FULL` (the study's), `QUICK`
(minutes on a 2-core CPU) and `TINY` (seconds: it only proves the pipeline runs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from adjpos.interventions import READOUTS, check_interventions, specs_in
from adjpos.interventions.spec import check_doses
from adjpos.sweep import DEFAULT_GRID
from adjpos.text.recipe import WIDTHS
from adjpos.validation import UsageError, check_int_list, check_positive_int, help_field, is_int

Grid = tuple[dict[str, list[Any]], ...]
QUICK_GRID: Grid = (
    {"init_range": [0.02, 0.1, 0.5], "d_model": [32, 64]},
    {"positional": ["none", "learned", "rotary", "alibi"]},
)
# The probing stage's feature sets: every carrier, the format baseline and two controls.
CARRIERS = ("variance", "norm", "cosine_first", "cosine_previous", "cosine_mean")
CARRIERS += ("cosine_profile", "cosine_sorted", "resid")
CONTROLS = ("token_identity", "shuffled:cosine_profile", "shuffled:resid")
# The carriers' causal tests and the position-curve arms (`adjpos.interventions.curve`, run
# apart at their own sizes), as the intervention table's ``stages`` say; the curve's swap and
# mirror are left to `adjpos intervene`: the mirror keeps no locality the swap breaks, and the
# scatter arm is the swap matched in size.
CARRIER_TESTS = specs_in("causal")
CURVE_ARMS = tuple(name for name in specs_in("arms") if name != "none")


@dataclass(frozen=True)
class StudySizes:
    """How much data, how many seeds and which grid each stage of the study uses."""

    n_eval: int = help_field("held-out prompts per task for exact-match accuracy", 2000)
    n_sequences: int = help_field(
        "held-out task sequences for the adjacency and variance stages", 256
    )
    trained_seeds: tuple[int, ...] | None = help_field(
        "seeds of the trained models of each task that every stage measures, each paired "
        "with its own initial weights (None: every shipped seed; seed 0 when the run trains "
        "its models)",
        None,
    )
    n_probe_sequences: int = help_field("sequences of one length per probed model", 64)
    features: tuple[str, ...] = help_field("feature sets probed", CARRIERS + CONTROLS)
    probes: tuple[str, ...] = help_field(
        "probes (spline reads the one-number sets only)", ("ridge", "logistic", "spline")
    )
    intervention_prompts: int = help_field(
        "fresh held-out prompts per task for the causal tests (as many again fit them)", 200
    )
    intervention_layers: tuple[int, ...] | None = help_field(
        "layers the causal tests intervene at (None: every block's input; layer 0, the token "
        "embeddings, is not counted)",
        (1, 2, 3),
    )
    interventions: tuple[str, ...] = help_field(
        "interventions of the causal tests, each with its control (default: every carrier's "
        "of adjpos.interventions.SPECS)",
        CARRIER_TESTS,
    )
    control_draws: int = help_field("draws of each random control of the causal tests", 20)
    readouts: tuple[str, ...] = help_field(
        "read-out variants of the causal tests and arms ('kept': the read-out positions "
        "untouched, which the verdicts use; 'changed' too: changed like the others, beside)",
        ("kept",),
    )
    curve_layers: tuple[int, ...] = help_field(
        "layers of the position-curve arms (CURVE_ARMS; none: not run)", (1, 2)
    )
    curve_prompts: int = help_field("fresh held-out prompts per seed for the arms", 200)
    curve_draws: int = help_field("draws of the arms' scatter and random control", 20)
    curve_doses: tuple[int | float, ...] = help_field(
        "the arms' sizes: at m, the size of the curve's full shift by m, at m < 1 that fraction "
        "of the shift by 1's (a size needs a shift for the rule to read it, and locality two "
        "sizes; the half shift keeps a size measurable where the shift by 1 already breaks the "
        "random control, and within a short interior's reach)",
        (0.5, 1, 2),
    )
    curve_added: int = help_field(
        "sizes a layer's arms may add where fewer than Criteria.min_sizes of curve_doses are "
        "measurable (each chosen from the random control's exact match so far: "
        "adjpos.interventions.spec.added_dose; 0: none)",
        3,
    )
    dynamics_seeds: tuple[int, ...] = help_field(
        "trained seeds whose training snapshots the dynamics stage measures (one shipped seed "
        "of a task keeps its snapshots; seeds without them are skipped; a run that trains its "
        "models trains seed 0)",
        (0, 1, 2),
    )
    dynamics_snapshots: int | None = help_field(
        "snapshots measured per seed, spread evenly over the log-spaced steps (the first and "
        "the last always among them; None: every snapshot)",
        None,
    )
    dynamics_prompts: int = help_field("held-out prompts per snapshot for exact match", 500)
    dynamics_sequences: int = help_field(
        "held-out sequences per snapshot for adjacency, variance and the probe", 128
    )
    cv: int = help_field("folds, grouped by sequence", 5)
    dynamics_cv: int = help_field(
        "folds of each snapshot's position probe, grouped by sequence (fewer than `cv`: the "
        "snapshots' probe is a control, measured at every snapshot of every seed)",
        3,
    )
    repeats: int = help_field("seeds (folds and shuffles) of each probe", 2)
    grid: Grid = help_field("the random-init sweep's grid (a union of sub-grids)", DEFAULT_GRID)
    sweep_seeds: tuple[int, ...] = help_field("model seeds of each sweep cell", (0, 1, 2))
    sweep_sequences: int = help_field("random sequences per sweep cell", 32)
    sweep_len: int = help_field("tokens per sweep sequence", 32)
    sweep_layers: int = help_field("blocks of the sweep's base model", 4)
    theory_scales: tuple[float, ...] = help_field(
        "init scales of the first-layer models", (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
    )
    theory_seeds: tuple[int, ...] = help_field("seeds of each first-layer model", (0, 1, 2))
    theory_sequences: int = help_field("sequences of distinct tokens per first-layer model", 256)
    theory_samples: int = help_field("Monte Carlo draws of the first-layer prediction", 512)
    theory_heatmap_scale: float = help_field("init scale of the first-layer heatmaps", 0.1)
    text_sequences: int = help_field("windows of held-out text per text model", 64)
    text_seeds: tuple[int, ...] | None = help_field("text models' seeds (None: all shipped)", None)
    text_doses: tuple[int | float, ...] = help_field(
        "the text arms' sizes (as curve_doses; curve_draws draws, in the models with NoPE "
        "blocks): a second size for the rule; a full shift by more than 2 is hardly larger "
        "on text",
        (1, 2),
    )
    text_widths: tuple[int, ...] = help_field(
        "widths of the text models read (64: text-LAYOUT; 128: text-LAYOUT-d128)", WIDTHS
    )
    train_steps: int | None = help_field(
        "steps when the study trains its models (None: the shipped recipe's)", None
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            unused = value is None or (f.name == "curve_layers" and value == ())  # arms not run
            if f.name == "curve_added" and not (is_int(value) and value >= 0):
                raise UsageError(f"curve_added must be an int >= 0, got {value!r}")
            if f.name != "curve_added" and (
                f.type == "int" or f.type == "int | None" and value is not None
            ):
                check_positive_int(f.name, value)
            elif f.name.endswith(("seeds", "_layers", "_widths")) and not unused:
                check_int_list(f.name, value)
        check_doses(list(self.curve_doses))
        check_doses(list(self.text_doses))
        check_interventions(self.interventions)
        if set(self.text_widths) - set(WIDTHS):
            raise UsageError(
                f"text_widths must be among the shipped {list(WIDTHS)}, got {self.text_widths}"
            )
        if not self.readouts or set(self.readouts) - set(READOUTS):
            raise UsageError(f"readouts must be names from {list(READOUTS)}, got {self.readouts}")
        if self.theory_heatmap_scale not in self.theory_scales:
            raise UsageError(
                f"theory_heatmap_scale={self.theory_heatmap_scale} must be one of "
                f"theory_scales {list(self.theory_scales)}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Every size as plain JSON-able values."""
        return dataclasses.asdict(self)


FULL = StudySizes()
# What QUICK changes, stage by stage.
QUICK = dataclasses.replace(
    FULL,
    **dict(n_eval=64, n_sequences=32, train_steps=40),
    **dict(n_probe_sequences=24, cv=4, repeats=1, probes=("ridge", "spline")),
    features=("variance", "cosine_first", "cosine_profile"),
    **dict(intervention_prompts=12, intervention_layers=(1,), control_draws=2, readouts=("kept",)),
    interventions=("none", "norm_permute", "norm_scale_control", "subspace_swap")
    + ("subspace_swap_random",),
    # The arms at one size (locality, which needs two, stays within): a smoke test.
    **dict(curve_layers=(1,), curve_prompts=8, curve_draws=2, curve_doses=(1,), curve_added=0),
    **dict(dynamics_snapshots=2, dynamics_prompts=32, dynamics_sequences=16),
    **dict(grid=QUICK_GRID, sweep_seeds=(0,), sweep_sequences=8, sweep_len=16, sweep_layers=2),
    **dict(theory_scales=(0.02, 0.1, 0.5), theory_seeds=(0,), theory_sequences=64),
    theory_samples=128,
    **dict(text_sequences=12, text_seeds=(0,), text_widths=WIDTHS[:1], text_doses=(1,)),
)
# What TINY changes from QUICK: it only proves the pipeline runs.
TINY = dataclasses.replace(
    QUICK,
    **dict(trained_seeds=(0, 1), n_eval=8, n_sequences=8, train_steps=2),
    **dict(n_probe_sequences=8, cv=2),
    features=("variance", "cosine_first", "cosine_profile", "token_identity"),
    readouts=("kept", "changed"),
    interventions=("none", "norm_permute", "norm_scale_control"),
    curve_layers=(),
    **dict(dynamics_seeds=(1,), dynamics_prompts=8, dynamics_sequences=8),
    grid=({"init_range": [0.1], "d_model": [16]}, {"positional": ["none", "learned"]}),
    **dict(sweep_sequences=2, sweep_len=6, sweep_layers=1),
    **dict(theory_scales=(0.1,), theory_sequences=8, theory_samples=8),
    **dict(text_sequences=8, text_seeds=(0,)),
)
SIZES = {"full": FULL, "quick": QUICK, "tiny": TINY}
