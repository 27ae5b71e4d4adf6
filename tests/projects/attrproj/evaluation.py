"""A DatasetEvaluator for attributes: mean accuracy over attributes (mA) and instance F1."""

import copy
from collections import OrderedDict

import torch

from fastreid.evaluation.evaluator import DatasetEvaluator
from fastreid.utils import comm


class AttrEvaluator(DatasetEvaluator):
    def __init__(self, cfg, output_dir=None):
        self.cfg = cfg
        self._output_dir = output_dir
        self.scores, self.labels = [], []

    def reset(self):
        self.scores, self.labels = [], []

    def process(self, inputs, outputs):
        self.labels.append(inputs["targets"].cpu().float())
        self.scores.append(outputs.cpu().float())

    def evaluate(self):
        scores, labels = self.scores, self.labels
        if comm.get_world_size() > 1:
            comm.synchronize()
            scores, labels = sum(comm.gather(scores), []), sum(comm.gather(labels), [])
            if not comm.is_main_process():
                return {}
        predicted = (torch.cat(scores) >= self.cfg.TEST.THRES).float()
        truth = torch.cat(labels)
        positive = (predicted * truth).sum(0) / truth.sum(0).clamp(min=1)
        negative = ((1 - predicted) * (1 - truth)).sum(0) / (1 - truth).sum(0).clamp(min=1)
        mean_accuracy = float(((positive + negative) / 2).mean()) * 100
        both = (predicted * truth).sum(1)
        precision = (both / predicted.sum(1).clamp(min=1)).mean()
        recall = (both / truth.sum(1).clamp(min=1)).mean()
        f1 = float(2 * precision * recall / (precision + recall).clamp(min=1e-12)) * 100
        self._results = OrderedDict([("mA", mean_accuracy), ("F1", f1), ("metric", mean_accuracy)])
        return copy.deepcopy(self._results)
