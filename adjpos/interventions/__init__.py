"""Interventions: change one carrier of position inside a model and leave the others intact.

Each intervention is a small frozen object applied at one site with TransformerLens hooks,
`intervene(model, intervention, layer=l)`, on any TransformerLens model; any object with a
``site`` and a call on the activations there is one (your own too, see `hooks`). Layer l is
numbered as adjpos numbers residual layers: the hidden states entering block l
(``blocks.{l}.hook_resid_pre``; layer 0 = the token embeddings), so l runs over
0 .. n_layers - 1. `UniformAttention` acts on block l's attention pattern instead.

- `NoIntervention` (``none``): the baseline, through the same code path.
- `NormPermute` (``norm_permute``): each state keeps its direction and takes the norm of
  another position of the same sequence (a seeded random permutation, or the mirror
  k -> n - 1 - k). Every cosine is unchanged.
- `NormPermuteControl` (``norm_permute_control``): each state keeps its direction and takes the
  norm of the same position in another sequence of the batch (the next row, cyclically), a
  change of norms that moves no position information between positions (but a smaller one).
- `NormScaleControl` (``norm_scale_control``): the size-matched control: the permutation's own
  norm ratios, applied at random places (at the read-out positions, its own ratio).
- `NormCommonScale` (``norm_common_scale``): every norm of a sequence scaled by one factor of
  the permutation's mean log-norm change: the norms' order over positions kept.
- `SubspaceSwap` (``subspace_swap``): each state's component in the position subspace (LDA of
  position, rank r) replaced by that of another position of its sequence, the norm restored;
  ``subspace_swap_random`` swaps in a random subspace of the same rank holding the same share
  of the states' variance instead.
- `LeaceErase` (``leace_position``): linear erasure of position with LEACE; ``leace_random``
  erases a concept of the same rank fitted to shuffled position labels.
- `SubspaceErase` (``erase_random``): as many random directions as LEACE erases, chosen so the
  states change as much (LEACE's matched control).
- `UniformAttention` (``uniform_attention``): block l's attention pattern replaced by uniform
  causal attention (the first-layer theory's idealisation), for all heads or some.
- The position curve's arms (``position_shift``, ``position_rotate``, ``position_scatter``,
  ``position_remove``, their control ``position_random``, and ``position_edges`` with its
  control ``position_edges_random``; the `curve` subpackage, one row each in its arm table
  `curve.arms.ARMS`), on each prompt's runs (`adjpos.tasks.Task.runs`): the curve shifted by k
  inside each run (neighbours kept), rotated in its principal subspace (every distance kept),
  each run's interior scattered (locality broken), pulled toward its mean, or a random curve
  of its norm profile added; each run's edges moved to the points just outside it. Each is
  measured at several sizes (a dose), the arms matched in change size at every prompt length,
  with its manipulation checks (`curve.checks`, numbers the study judges) and the share of
  wrong answers at each offset.
  `cell_numbers` turns the table and its paired differences (`CURVE_DIFFERENCES`) into the
  numbers of the study's rule (`adjpos.study.rules`), on text (`text_intervention_table`,
  next-token loss) with ``harm=-1``.

`SPECS` is the intervention table: one `InterventionSpec` per name, saying what it is
compared with (``control``), whether it is a random control measured over draws (``drawn``),
the read-out variants it runs in, what it is fitted on, and its factory. `intervention_table`
measures each on a model's task (exact match under greedy decoding, teacher-forced token
accuracy, the adjacency score and variance ratio it leaves, the size of the change), with
bootstrap intervals over prompts, in two read-out variants (`READOUTS`: the read-out
positions kept or changed); each tested intervention is set against its control by a paired
difference over prompts, the random controls measured over several draws, batched in one
pass (`measure_draws`, `Stacked`). ``adjpos intervene`` is its command.
`text_intervention_table` runs the same interventions through the same runner on a language
model and text (``adjpos intervene --hf SOURCE --text FILE``): next-token loss and accuracy
on each sequence's continuation with its context changed, paired over sequences.

Each states in its tests what it preserves (`tests/interventions`).
"""

from adjpos.interventions.attention import UniformAttention
from adjpos.interventions.curve.arms import ARMS, ArmKind, Check, CurveArm
from adjpos.interventions.curve.change import CurveChange
from adjpos.interventions.curve.numbers import (
    CURVE_DIFFERENCES,
    cell_numbers,
)
from adjpos.interventions.curve.position import position_curves
from adjpos.interventions.decoding import measure_draws
from adjpos.interventions.hooks import Intervention, NoIntervention, Stacked, intervene
from adjpos.interventions.norms import (
    NormCommonScale,
    NormPermute,
    NormPermuteControl,
    NormScaleControl,
)
from adjpos.interventions.prompts import (
    HeldOut,
    fit_prompt_states,
    fit_states,
    held_out_prompts,
)
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

__all__ = [
    "ARMS",
    "CURVE_DIFFERENCES",
    "DEFAULT_DOSES",
    "DEFAULT_DRAWS",
    "DEFAULT_INTERVENTIONS",
    "DEFAULT_PROMPTS",
    "DEFAULT_RANK",
    "DEFAULT_READOUTS",
    "FAMILIES",
    "INTERVENTION_TABLE",
    "NAMES",
    "READOUTS",
    "SPECS",
    "STAGES",
    "TEXT_TABLE",
    "ArmKind",
    "Check",
    "CurveArm",
    "CurveChange",
    "Dose",
    "Fitted",
    "HeldOut",
    "Intervention",
    "InterventionSpec",
    "LeaceErase",
    "NoIntervention",
    "NormCommonScale",
    "NormPermute",
    "NormPermuteControl",
    "NormScaleControl",
    "Stacked",
    "SubspaceErase",
    "SubspaceSwap",
    "UniformAttention",
    "cell_numbers",
    "check_interventions",
    "fit_prompt_states",
    "fit_states",
    "held_out_prompts",
    "intervene",
    "intervention_table",
    "measure_draws",
    "plan_units",
    "position_curves",
    "specs_in",
    "text_intervention_table",
]
