"""A retrieval project in the shape of upstream's FastRetri and PartialReID, written for these
tests: ``from retriproj import *`` registers its data set."""

from .config import add_retri_config
from .datasets import TinyPeople
from .retri_evaluator import RetriEvaluator, recall_at_ks

__all__ = ["RetriEvaluator", "TinyPeople", "add_retri_config", "recall_at_ks"]
