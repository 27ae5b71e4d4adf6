"""Training: the loop and its hooks, the default trainer and workflow, multi-process launch."""

from .defaults import DefaultPredictor, DefaultTrainer, default_argument_parser, default_setup, resolve_device
from .hooks import (
    BestCheckpointer,
    EvalHook,
    EvaluationFailedError,
    IterationTimer,
    LayerFreeze,
    LRScheduler,
    PeriodicCheckpointer,
    PeriodicWriter,
    PlateauHook,
    PreciseBN,
)
from .interrupts import TrainingInterruptedError
from .launch import launch
from .train_loop import AMPTrainer, HookBase, NonFiniteLossError, SimpleTrainer, TrainerBase

__all__ = [
    "AMPTrainer",
    "BestCheckpointer",
    "DefaultPredictor",
    "DefaultTrainer",
    "EvalHook",
    "EvaluationFailedError",
    "HookBase",
    "IterationTimer",
    "LRScheduler",
    "LayerFreeze",
    "NonFiniteLossError",
    "PeriodicCheckpointer",
    "PeriodicWriter",
    "PlateauHook",
    "PreciseBN",
    "SimpleTrainer",
    "TrainerBase",
    "TrainingInterruptedError",
    "default_argument_parser",
    "default_setup",
    "launch",
    "resolve_device",
]
