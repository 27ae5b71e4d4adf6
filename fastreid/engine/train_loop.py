"""Upstream's import path of the training loop and its trainers.

The loop and the hook base class live in :mod:`fastreid.engine.trainer_base`, the trainers of one
iteration (``SimpleTrainer``, ``AMPTrainer``) in :mod:`fastreid.engine.simple_trainer`.
"""

from .simple_trainer import AMPTrainer, NonFiniteLossError, SimpleTrainer
from .trainer_base import HookBase, TrainerBase

__all__ = ["AMPTrainer", "HookBase", "NonFiniteLossError", "SimpleTrainer", "TrainerBase"]
