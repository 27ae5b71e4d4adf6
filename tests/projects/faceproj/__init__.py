"""A verification project in the shape of upstream's FastFace, written for these tests: a
trainer that builds itself (its own ``__init__``), a second classifier trained beside the model
with its own optimizer, checkpointer and checkpoint hook. ``from faceproj import *`` registers
its meta-architecture and test data set."""

from .config import add_face_cfg
from .datasets import TinyPeoplePairs
from .face_evaluator import FaceEvaluator
from .modeling import CosineClassifier, TinyFaceBaseline
from .trainer import FaceTrainer

__all__ = [
    "CosineClassifier",
    "FaceEvaluator",
    "FaceTrainer",
    "TinyFaceBaseline",
    "TinyPeoplePairs",
    "add_face_cfg",
]
