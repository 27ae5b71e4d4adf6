"""A DatasetEvaluator for retrieval: Recall@K of the queries against the gallery."""

import copy
from collections import OrderedDict

import torch
import torch.nn.functional as F

from fastreid.evaluation import DatasetEvaluator
from fastreid.utils import comm


def recall_at_ks(query, query_labels, gallery, gallery_labels, ks, cosine=True):
    """Percentage of queries with a same-label gallery item among their k nearest, per k."""
    if cosine:
        query, gallery = F.normalize(query, dim=1), F.normalize(gallery, dim=1)
    distances = torch.cdist(query, gallery)
    nearest = distances.topk(min(max(ks), gallery.shape[0]), dim=1, largest=False).indices
    hits = gallery_labels[nearest] == query_labels[:, None]
    return {k: round(float(hits[:, :k].any(dim=1).float().mean()) * 100, 2) for k in ks}


class RetriEvaluator(DatasetEvaluator):
    def __init__(self, cfg, num_query, output_dir=None):
        self.cfg = cfg
        self._num_query = num_query
        self._output_dir = output_dir
        self.recalls = cfg.TEST.RECALLS
        self.features, self.labels = [], []

    def reset(self):
        self.features, self.labels = [], []

    def process(self, inputs, outputs):
        self.features.append(outputs.cpu())
        self.labels.extend(inputs["targets"].tolist())

    def evaluate(self):
        features, labels = self.features, self.labels
        if comm.get_world_size() > 1:
            comm.synchronize()
            features, labels = sum(comm.gather(features), []), sum(comm.gather(labels), [])
            if not comm.is_main_process():
                return {}
        features, labels = torch.cat(features), torch.tensor(labels)
        q = self._num_query
        recalls = recall_at_ks(
            features[:q],
            labels[:q],
            features[q:],
            labels[q:],
            self.recalls,
            cosine=self.cfg.TEST.RETRI.COSINE,
        )
        self._results = OrderedDict((f"Recall@{k}", v) for k, v in recalls.items())
        self._results["metric"] = recalls[self.recalls[0]]
        return copy.deepcopy(self._results)
