"""Training: the loop and its hooks, the default trainer and workflow, multi-process launch."""

from fastreid.utils.device import resolve_device

from . import hooks
from .defaults import DefaultPredictor, DefaultTrainer, default_argument_parser, default_setup
from .hooks import (
    SWA,
    AutogradProfiler,
    BestCheckpointer,
    CallbackHook,
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
    "SWA",
    "AMPTrainer",
    "AutogradProfiler",
    "BestCheckpointer",
    "CallbackHook",
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
    "hooks",
    "launch",
    "resolve_device",
]
