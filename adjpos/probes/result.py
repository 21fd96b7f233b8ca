"""`ProbeResult`: scores per layer x feature set x probe x metric, each beside its baseline.

No torch, and pandas only when a table is asked for, so figures and readers of saved results
need nothing heavy.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adjpos.tables import Table
from adjpos.validation import help_field

# The columns of a probe table: one row per score (``std`` is over seeds, or sequences).
PROBE_TABLE = Table(
    model="string",
    layer="int64",
    features="string",
    probe="string",
    metric="string",
    value="float64",
    baseline="float64",
    std="float64",
    sem="float64",
    backward_only="boolean",
    gain_chance="float64",
    gain_layer0="float64",
    gain_token_identity="float64",
)
TOKENS = "token_identity"  # the leak-aware baseline set (see adjpos.probes.features)
# Metrics where a smaller value is better; every other metric is better when larger.
LOWER_IS_BETTER = ("mae", "mean_abs_distance")


@dataclass(frozen=True)
class ProbeScore:
    """One measured score and the score of a position-blind predictor on the same folds."""

    layer: int = help_field("residual-stream layer (0 = token embeddings)")
    features: str = help_field("feature set, e.g. 'variance' or 'shuffled:resid'")
    probe: str = help_field("'ridge', 'logistic', or an order-reconstruction method")
    metric: str = help_field("e.g. 'r2', 'mae', 'accuracy', 'abs_kendall_tau'")
    value: float = help_field("mean over seeds (and folds, or sequences)")
    baseline: float = help_field("chance: the same metric for a position-blind guess")
    std: float = help_field(
        "std of `value` over the seeds (NaN for one seed); over the sequences for order "
        "reconstruction"
    )
    backward_only: bool = help_field("the features use only the state at k and earlier ones", False)
    sem: float = help_field(
        "standard error of `value`: over the folds (their std / sqrt(folds), averaged over "
        "seeds), or over the sequences for order reconstruction",
        math.nan,
    )

    @property
    def above_chance(self) -> float:
        """How much better than the baseline: value - baseline, sign-flipped for errors."""
        gain = self.value - self.baseline
        return -gain if self.metric in LOWER_IS_BETTER else gain


@dataclass(frozen=True)
class ProbeResult:
    """Position-probing scores of one model, with how they were measured.

    Example:
        >>> score = ProbeScore(1, "variance", "ridge", "r2", 0.5, 0.0, 0.01)
        >>> result = ProbeResult("demo", (score,), n_sequences=8, seq_len=16, cv=2, seeds=(0,))
        >>> result.value(1, "variance", "ridge", "r2")
        0.5
        >>> print(result.to_csv(), end="")
        model,layer,features,probe,metric,value,baseline,std,sem,backward_only,gain_chance,gain_layer0,gain_token_identity
        demo,1,variance,ridge,r2,0.5,0.0,0.01,,False,0.5,,
    """

    model: str = help_field("label of the model (the CSV's `model` column)")
    scores: tuple[ProbeScore, ...] = help_field("one entry per measured score")
    n_sequences: int = help_field("sequences probed (each in one fold only)")
    seq_len: int = help_field("tokens per sequence (the longest, if mixed)")
    cv: int = help_field("folds, grouped by sequence (0: order reconstruction only)")
    seeds: tuple[int, ...] = help_field("seeds of the folds and shuffles")

    def __add__(self, other: ProbeResult) -> ProbeResult:
        """Both results' scores under this result's model label and settings."""
        if not isinstance(other, ProbeResult):
            return NotImplemented
        return dataclasses.replace(self, scores=self.scores + other.scores)

    def value(self, layer: int, features: str, probe: str, metric: str) -> float:
        """The value of one score (KeyError naming what exists when there is none)."""
        return self.find(layer, features, probe, metric).value

    def find(self, layer: int, features: str, probe: str, metric: str) -> ProbeScore:
        """The `ProbeScore` with these keys."""
        keys = (layer, features, probe, metric)
        for score in self.scores:
            if (score.layer, score.features, score.probe, score.metric) == keys:
                return score
        raise KeyError(
            f"no score for layer={layer}, features={features!r}, probe={probe!r}, "
            f"metric={metric!r}; this result has layers {self.layers}, features "
            f"{self.feature_sets}, probes {self.probes}, metrics {self.metrics}"
        )

    @property
    def layers(self) -> list[int]:
        return sorted({s.layer for s in self.scores})

    @property
    def feature_sets(self) -> list[str]:
        return _unique(s.features for s in self.scores)

    @property
    def probes(self) -> list[str]:
        return _unique(s.probe for s in self.scores)

    @property
    def metrics(self) -> list[str]:
        return _unique(s.metric for s in self.scores)

    def records(self) -> list[dict[str, Any]]:
        """One dict per score: its fields, then three gains, each signed so that positive is
        better (errors sign-flipped): over its chance baseline (``gain_chance``), over the
        same feature set, probe and metric at layer 0 of this model (``gain_layer0``; NaN
        when layer 0 was not probed) and over ``token_identity`` with the same probe and
        metric (``gain_token_identity``; NaN when it was not probed)."""
        value = {(s.layer, s.features, s.probe, s.metric): s.value for s in self.scores}
        identity = {(s.probe, s.metric): s.value for s in self.scores if s.features == TOKENS}
        rows = []
        for s in self.scores:
            sign = -1.0 if s.metric in LOWER_IS_BETTER else 1.0
            at_zero = value.get((0, s.features, s.probe, s.metric), math.nan)
            rows.append(
                {
                    "model": self.model,
                    **dataclasses.asdict(s),
                    "gain_chance": s.above_chance,
                    "gain_layer0": sign * (s.value - at_zero),
                    "gain_token_identity": sign
                    * (s.value - identity.get((s.probe, s.metric), math.nan)),
                }
            )
        return rows

    def to_frame(self) -> Any:
        """The records as a typed pandas DataFrame (the columns of `PROBE_TABLE`)."""
        return PROBE_TABLE.frame(self.records())

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """CSV with the columns of `PROBE_TABLE`: model, layer, features, probe, metric,
        value, baseline, std. Returns the text, and writes it to `path` when one is given."""
        text = self.to_frame().to_csv(index=False, lineterminator="\n")
        return _maybe_write(path, text)

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """Everything, settings included, as JSON; `from_json` reads it back."""
        data = dataclasses.asdict(self)
        return _maybe_write(path, json.dumps(data, indent=1) + "\n")

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike) -> ProbeResult:
        """Read what `to_json` wrote (a JSON string or a file path)."""
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text()
        data = json.loads(text)
        scores = tuple(ProbeScore(**s) for s in data.pop("scores"))
        return cls(scores=scores, **{**data, "seeds": tuple(data["seeds"])})


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _maybe_write(path: str | os.PathLike | None, text: str) -> str:
    if path is not None:
        from adjpos.runs import write_text

        write_text(path, text)
    return text
