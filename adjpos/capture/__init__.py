"""Hook-based capture of hidden states at every layer (stacked, streamed, or reduced in the
hooks of one forward pass)."""

from adjpos.capture.residuals import (
    SITES,
    capture_residuals,
    check_layers,
    check_site,
    check_tokens,
    hook_name,
    iter_residuals,
    n_capture_layers,
    reduce_residuals,
)

__all__ = [
    "SITES",
    "capture_residuals",
    "check_layers",
    "check_site",
    "check_tokens",
    "hook_name",
    "iter_residuals",
    "n_capture_layers",
    "reduce_residuals",
]
