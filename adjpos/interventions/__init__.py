"""Interventions: change one carrier of position inside a model and leave the others intact.

Each intervention is a small frozen object applied at one site with TransformerLens hooks,
`intervene(model, intervention, layer=l)`, on any TransformerLens model; any object with a
``site`` and a call on the activations there is one (your own too, see `hooks`). Layer l is
numbered as adjpos numbers residual layers: the hidden states entering block l
(``blocks.{l}.hook_resid_pre``; layer 0 = the token embeddings), so l runs over
0 .. n_layers - 1. `UniformAttention` acts on block l's attention pattern instead.

The kinds, each module with its controls: `norms` (each state's norm moved to another
position, `NormPermute`, against size-matched rescalings), `subspaces` (the position
subspace's components swapped, `SubspaceSwap`, or position erased with LEACE, `LeaceErase`,
against random subspaces of matched size), `attention` (`UniformAttention`: uniform causal
attention, the first-layer theory's idealisation) and `curve` (the position curve's arms,
``position_shift``, ``position_rotate``, ... on each prompt's runs, one row each of the arm
table `curve.arms.ARMS`, matched in change size at several sizes, with their manipulation
checks; `cell_numbers` turns their rows and paired differences, `CURVE_DIFFERENCES`, into
the numbers of the study's rule, on text with ``harm=-1``). `NoIntervention` (``none``) is
the baseline, through the same code path.

`SPECS` is the intervention table (`specs`): one `InterventionSpec` per name, with its
control, its draws, read-out variants (`READOUTS`), fitting and factory. `intervention_table`
measures each on a model's task (exact match under greedy decoding and what the change did,
with bootstrap intervals over prompts, each tested intervention set against its control;
``adjpos intervene``), `text_intervention_table` on a language model and text (next-token loss
on each sequence's continuation; ``adjpos intervene --hf SOURCE --text FILE``), both through
one runner that measures a random control's draws in one batched pass (`measure_draws`,
`Stacked`).

Each states in its tests what it preserves (`tests/interventions`).
"""

from adjpos.interventions.attention import UniformAttention
from adjpos.interventions.curve.arms import ARMS, ArmKind, Check, CurveArm
from adjpos.interventions.curve.change import CurveChange
from adjpos.interventions.curve.numbers import CURVE_DIFFERENCES, cell_numbers
from adjpos.interventions.curve.position import position_curves
from adjpos.interventions.decoding import measure_draws
from adjpos.interventions.hooks import Intervention, NoIntervention, Stacked, intervene
from adjpos.interventions.norms import (
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
)
from adjpos.interventions.prompts import HeldOut, fit_prompt_states, fit_states, held_out_prompts
from adjpos.interventions.runner import DEFAULT_DRAWS
from adjpos.interventions.spec import (
    DEFAULT_DOSES,
    DEFAULT_RANK,
    DEFAULT_READOUTS,
    READOUTS,
    STAGES,
    Dose,
    Fitted,
    InterventionSpec,
)
from adjpos.interventions.specs import (
    DEFAULT_INTERVENTIONS,
    FAMILIES,
    NAMES,
    SPECS,
    check_interventions,
    plan_units,
    specs_in,
)
from adjpos.interventions.subspaces import LeaceErase, SubspaceErase, SubspaceSwap
from adjpos.interventions.task import DEFAULT_PROMPTS, INTERVENTION_TABLE, intervention_table
from adjpos.interventions.text import TEXT_TABLE, text_intervention_table

__all__ = ["ARMS", "CURVE_DIFFERENCES", "DEFAULT_DOSES", "DEFAULT_DRAWS", "DEFAULT_INTERVENTIONS"]
__all__ += ["DEFAULT_PROMPTS", "DEFAULT_RANK", "DEFAULT_READOUTS", "FAMILIES"]
__all__ += ["INTERVENTION_TABLE", "NAMES", "READOUTS", "SPECS", "STAGES", "TEXT_TABLE", "ArmKind"]
__all__ += ["Check", "CurveArm", "CurveChange", "Dose", "Fitted", "HeldOut", "Intervention"]
__all__ += ["InterventionSpec", "LeaceErase", "NoIntervention", "NormCommonScale", "NormPermute"]
__all__ += ["NormPermuteControl", "NormScaleControl", "Stacked", "SubspaceErase", "SubspaceSwap"]
__all__ += ["UniformAttention", "cell_numbers", "check_interventions", "fit_prompt_states"]
__all__ += ["fit_states", "held_out_prompts", "intervene", "intervention_table", "measure_draws"]
__all__ += ["plan_units", "position_curves", "specs_in", "text_intervention_table"]
