"""Compositions of capture and metrics (and, later, training and probes)."""

from adjpos.experiments.scoring import adjacency_score

__all__ = ["adjacency_score"]
