"""A DatasetEvaluator for verification: accuracy of the best cosine threshold over the pairs."""

import copy
import json
import os
from collections import OrderedDict

import torch
import torch.nn.functional as F

from fastreid.evaluation import DatasetEvaluator
from fastreid.utils import comm


class FaceEvaluator(DatasetEvaluator):
    def __init__(self, cfg, labels, dataset_name, output_dir=None):
        self.cfg = cfg
        self.labels = labels
        self.dataset_name = dataset_name
        self._output_dir = output_dir
        self.features = []

    def reset(self):
        self.features = []

    def process(self, inputs, outputs):
        self.features.append(outputs.cpu())

    def evaluate(self):
        features = self.features
        if comm.get_world_size() > 1:
            comm.synchronize()
            features = sum(comm.gather(features), [])
            if not comm.is_main_process():
                return {}
        features = F.normalize(torch.cat(features), dim=1)
        similarity = (features[0::2] * features[1::2]).sum(dim=1)
        same = torch.tensor(self.labels)
        accuracies = [((similarity >= t) == same).float().mean().item() for t in similarity.tolist()]
        best = max(range(len(accuracies)), key=accuracies.__getitem__)
        self._results = OrderedDict(
            [
                ("Accuracy", accuracies[best] * 100),
                ("Threshold", similarity[best].item()),
                ("metric", accuracies[best] * 100),
            ]
        )
        if self._output_dir:
            os.makedirs(self._output_dir, exist_ok=True)
            with open(os.path.join(self._output_dir, f"{self.dataset_name}_similarities.json"), "w") as f:
                json.dump({"similarity": similarity.tolist(), "same": self.labels}, f)
        return copy.deepcopy(self._results)
