"""The attribute data sets, registered in ``DATASET_REGISTRY`` under upstream's names."""

from .bases import Dataset
from .dukemtmcattr import DukeMTMCAttr
from .market1501attr import Market1501Attr
from .pa100k import PA100K

__all__ = ["ATTRIBUTE_DATASETS", "Dataset", "DukeMTMCAttr", "Market1501Attr", "PA100K"]

#: The attribute data sets of this family, by their config names.
ATTRIBUTE_DATASETS = {cls.__name__: cls for cls in (PA100K, Market1501Attr, DukeMTMCAttr)}
