"""Training on the synthetic tasks: config, the loop, greedy decoding."""

from adjpos.training.config import TrainConfig, TrainResult
from adjpos.training.decode import evaluate, predict
from adjpos.training.loop import train

__all__ = ["TrainConfig", "TrainResult", "evaluate", "predict", "train"]
