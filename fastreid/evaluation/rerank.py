"""Re-ranking for evaluation (``TEST.RERANK``), upstream's import path; the algorithms live in
:mod:`fastreid.utils.kreciprocal`, whose public names this module re-exports.

Two methods (``TEST.RERANK.METHOD``, :func:`rerank_features`):

- ``"knn_jaccard"`` (default): upstream FastReID's ``ReidEvaluator`` — its kNN Jaccard distance
  combined with the plain ``TEST.METRIC`` distance, ``(1 - lambda) * jaccard + lambda * dist``.
  Reproduces upstream's re-ranked numbers.
- ``"k_reciprocal"``: the classic k-reciprocal re-ranking of Zhong et al. (CVPR 2017, the
  ``person-re-ranking`` code and upstream's ``re_ranking`` function): ``k1 + 1`` neighbours, weights
  from row-normalised squared distances, combined with the row-normalised squared distance.
"""

from fastreid.utils.kreciprocal import *  # noqa: F403 (every public name, listed once there)
from fastreid.utils.kreciprocal import __all__ as __all__
