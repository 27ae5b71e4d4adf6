"""Default configuration: upstream FastReID's keys, then the keys this project adds.

Every key of upstream FastReID's defaults is here with upstream's default value, so upstream
YAML files merge unchanged. The keys upstream does not have (platform-safe data loading,
reproducibility and a few training conveniences, each marked ``[fastreid]``) are defined in
:mod:`fastreid.config.fastreid_keys` and added to ``_C`` at the end of this file.

Types matter: a YAML value must have the type of the default (ints are accepted where a
float is expected, lists where a tuple is expected). A few keys accept more than one type; they
are listed in ``MULTI_TYPE_KEYS`` at the bottom of this file.
"""

# fvcore's node, not fastreid.config.config.CfgNode: this module is data and imports nothing of
# fastreid but its key module (get_cfg() turns a copy into the checking CfgNode), so
# config <-> defaults is no cycle.
from fvcore.common.config import CfgNode as CN

from .fastreid_keys import add_fastreid_keys

_C = CN()

# -----------------------------------------------------------------------------
# MODEL
# -----------------------------------------------------------------------------
_C.MODEL = CN()
# "cuda", "cuda:1", "mps", "xpu", "cpu" or "auto" (CUDA, else MPS, else the CPU). A GPU that is
# missing falls back to the CPU with one log line.
_C.MODEL.DEVICE = "cuda"
_C.MODEL.META_ARCHITECTURE = "Baseline"
# Names of top-level modules (e.g. "backbone") frozen for SOLVER.FREEZE_ITERS iterations.
_C.MODEL.FREEZE_LAYERS = []
# Size of the memory queue of MoCo-style models (upstream key; unused by Baseline).
_C.MODEL.QUEUE_SIZE = 8192

# ---------------------------------------------------------------------------- #
# Backbone
# ---------------------------------------------------------------------------- #
_C.MODEL.BACKBONE = CN()
_C.MODEL.BACKBONE.NAME = "build_resnet_backbone"
# ResNet: "18x", "34x", "50x", "101x". OSNet: "x1_0", "x0_75", "x0_5", "x0_25". ResNeSt: "50x".."269x".
# ResNeXt: "50x", "101x", "152x". RegNet: "800x", "800y", ... EfficientNet: "b0".."b5".
# MobileNetV2: "1.0x".."0.1x". ShuffleNetV2: "0.5x".."2.0x". Full list: docs/MODEL_ZOO.md.
_C.MODEL.BACKBONE.DEPTH = "50x"
_C.MODEL.BACKBONE.LAST_STRIDE = 1
# Channels of the backbone's output feature map.
_C.MODEL.BACKBONE.FEAT_DIM = 2048
# Normalisation layers: "BN", "syncBN", "GhostBN", "FrozenBN".
_C.MODEL.BACKBONE.NORM = "BN"
_C.MODEL.BACKBONE.WITH_IBN = False
_C.MODEL.BACKBONE.WITH_SE = False
_C.MODEL.BACKBONE.WITH_NL = False
# Vision-transformer options (upstream keys).
_C.MODEL.BACKBONE.SIE_COE = 3.0
_C.MODEL.BACKBONE.STRIDE_SIZE = (16, 16)
_C.MODEL.BACKBONE.DROP_PATH_RATIO = 0.1
_C.MODEL.BACKBONE.DROP_RATIO = 0.0
_C.MODEL.BACKBONE.ATT_DROP_RATE = 0.0
# Load ImageNet weights: from PRETRAIN_PATH when set, else the published file (upstream's URLs,
# fastreid/modeling/backbones/pretrained_urls.py) or torchvision's, downloaded into TORCH_HOME.
_C.MODEL.BACKBONE.PRETRAIN = False
_C.MODEL.BACKBONE.PRETRAIN_PATH = ""

# ---------------------------------------------------------------------------- #
# Heads
# ---------------------------------------------------------------------------- #
_C.MODEL.HEADS = CN()
_C.MODEL.HEADS.NAME = "EmbeddingHead"
_C.MODEL.HEADS.NORM = "BN"
# 0 = taken from the training set.
_C.MODEL.HEADS.NUM_CLASSES = 0
# 0 = no embedding layer; the feature has the backbone's FEAT_DIM.
_C.MODEL.HEADS.EMBEDDING_DIM = 0
_C.MODEL.HEADS.WITH_BNNECK = False
# Feature used by metric losses and at test time: "before" or "after" the BNNeck.
_C.MODEL.HEADS.NECK_FEAT = "before"
_C.MODEL.HEADS.POOL_LAYER = "GlobalAvgPool"
# "Linear", "CosSoftmax", "ArcSoftmax" or "CircleSoftmax".
_C.MODEL.HEADS.CLS_LAYER = "Linear"
_C.MODEL.HEADS.MARGIN = 0.0
_C.MODEL.HEADS.SCALE = 1

# ---------------------------------------------------------------------------- #
# Losses
# ---------------------------------------------------------------------------- #
_C.MODEL.LOSSES = CN()
_C.MODEL.LOSSES.NAME = ("CrossEntropyLoss",)

_C.MODEL.LOSSES.CE = CN()
# Label smoothing: 0 = none, -1 = adaptive (ALPHA).
_C.MODEL.LOSSES.CE.EPSILON = 0.0
_C.MODEL.LOSSES.CE.ALPHA = 0.2
_C.MODEL.LOSSES.CE.SCALE = 1.0

_C.MODEL.LOSSES.FL = CN()
_C.MODEL.LOSSES.FL.ALPHA = 0.25
_C.MODEL.LOSSES.FL.GAMMA = 2
_C.MODEL.LOSSES.FL.SCALE = 1.0

_C.MODEL.LOSSES.TRI = CN()
# Margin 0 = soft margin.
_C.MODEL.LOSSES.TRI.MARGIN = 0.3
_C.MODEL.LOSSES.TRI.NORM_FEAT = False
_C.MODEL.LOSSES.TRI.HARD_MINING = False
_C.MODEL.LOSSES.TRI.SCALE = 1.0

# Circle and CosFace losses take the same keys with the same defaults.
_C.MODEL.LOSSES.CIRCLE = CN({"MARGIN": 0.25, "GAMMA": 128, "SCALE": 1.0})
_C.MODEL.LOSSES.COSFACE = _C.MODEL.LOSSES.CIRCLE.clone()

# Checkpoint loaded into the whole model (e.g. an upstream model_final.pth).
_C.MODEL.WEIGHTS = ""

# Pixel normalisation, applied inside the model on 0..255 images.
_C.MODEL.PIXEL_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
_C.MODEL.PIXEL_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]

# -----------------------------------------------------------------------------
# Knowledge distillation (upstream keys)
# -----------------------------------------------------------------------------
_C.KD = CN()
_C.KD.MODEL_CONFIG = []
_C.KD.MODEL_WEIGHTS = []
_C.KD.EMA = CN({"ENABLED": False})
_C.KD.EMA.MOMENTUM = 0.999

# -----------------------------------------------------------------------------
# INPUT
# -----------------------------------------------------------------------------
_C.INPUT = CN()
# [height, width]
_C.INPUT.SIZE_TRAIN = [256, 128]
_C.INPUT.SIZE_TEST = [256, 128]

_C.INPUT.CROP = CN({"ENABLED": False})
_C.INPUT.CROP.SIZE = [224, 224]
_C.INPUT.CROP.SCALE = [0.16, 1]
_C.INPUT.CROP.RATIO = [3.0 / 4.0, 4.0 / 3.0]

_C.INPUT.FLIP = CN({"ENABLED": False})
_C.INPUT.FLIP.PROB = 0.5

_C.INPUT.PADDING = CN({"ENABLED": False})
_C.INPUT.PADDING.MODE = "constant"
_C.INPUT.PADDING.SIZE = 10

_C.INPUT.CJ = CN({"ENABLED": False})
_C.INPUT.CJ.PROB = 0.5
_C.INPUT.CJ.BRIGHTNESS = 0.15
_C.INPUT.CJ.CONTRAST = 0.15
_C.INPUT.CJ.SATURATION = 0.1
_C.INPUT.CJ.HUE = 0.1

_C.INPUT.AFFINE = CN({"ENABLED": False})

_C.INPUT.AUTOAUG = CN({"ENABLED": False})
_C.INPUT.AUTOAUG.PROB = 0.0

_C.INPUT.AUGMIX = CN({"ENABLED": False})
_C.INPUT.AUGMIX.PROB = 0.0

# Random erasing; VALUE is the fill colour on the 0..255 scale.
_C.INPUT.REA = CN({"ENABLED": False})
_C.INPUT.REA.PROB = 0.5
_C.INPUT.REA.VALUE = [0.485 * 255, 0.456 * 255, 0.406 * 255]

_C.INPUT.RPT = CN({"ENABLED": False})
_C.INPUT.RPT.PROB = 0.5

# -----------------------------------------------------------------------------
# DATASETS
# -----------------------------------------------------------------------------
_C.DATASETS = CN()
_C.DATASETS.NAMES = ("Market1501",)
_C.DATASETS.TESTS = ("Market1501",)
# Train on train + query + gallery (upstream key).
_C.DATASETS.COMBINEALL = False

# -----------------------------------------------------------------------------
# DATALOADER
# -----------------------------------------------------------------------------
_C.DATALOADER = CN()
# "TrainingSampler", "NaiveIdentitySampler", "BalancedIdentitySampler", "SetReWeightSampler".
_C.DATALOADER.SAMPLER_TRAIN = "TrainingSampler"
# K: images per identity in a batch for the identity samplers.
_C.DATALOADER.NUM_INSTANCE = 4
# Requested worker processes. The loader policy may use fewer (Windows, a dataset that cannot
# be pickled, a script without a __main__ guard) and says why once.
_C.DATALOADER.NUM_WORKERS = 8
# Per-dataset weights for SetReWeightSampler.
_C.DATALOADER.SET_WEIGHT = []


# ---------------------------------------------------------------------------- #
# SOLVER
# ---------------------------------------------------------------------------- #
_C.SOLVER = CN()
# Mixed precision: float16 + GradScaler on CUDA, bfloat16 autocast on the CPU.
_C.SOLVER.AMP = CN({"ENABLED": False})
# Any torch.optim optimizer by class name, as upstream: "SGD" (with MOMENTUM, NESTEROV), "Adam",
# "AdamW", "RMSprop", "RAdam", "NAdam", "Adagrad", "Adadelta", "Adamax", "ASGD", "Rprop", ...
_C.SOLVER.OPT = "Adam"
_C.SOLVER.MAX_EPOCH = 120
_C.SOLVER.BASE_LR = 3e-4
# LR factor of the classifier layer.
_C.SOLVER.HEADS_LR_FACTOR = 1.0
_C.SOLVER.MOMENTUM = 0.9
_C.SOLVER.NESTEROV = False
_C.SOLVER.WEIGHT_DECAY = 0.0005
# Weight decay of normalisation layers' affine parameters (upstream's default).
_C.SOLVER.WEIGHT_DECAY_NORM = 0.0005
_C.SOLVER.BIAS_LR_FACTOR = 1.0
_C.SOLVER.WEIGHT_DECAY_BIAS = _C.SOLVER.WEIGHT_DECAY
# "MultiStepLR" or "CosineAnnealingLR".
_C.SOLVER.SCHED = "MultiStepLR"
# Epochs at the base LR before cosine annealing starts.
_C.SOLVER.DELAY_EPOCHS = 0
_C.SOLVER.GAMMA = 0.1
# Epochs at which MultiStepLR multiplies the LR by GAMMA.
_C.SOLVER.STEPS = [30, 55]
_C.SOLVER.ETA_MIN_LR = 1e-7
_C.SOLVER.WARMUP_FACTOR = 0.1
_C.SOLVER.WARMUP_ITERS = 1000
# "linear", "constant" or "exp".
_C.SOLVER.WARMUP_METHOD = "linear"
# Iterations during which MODEL.FREEZE_LAYERS stay frozen.
_C.SOLVER.FREEZE_ITERS = 0
# Save a checkpoint every this many epochs.
_C.SOLVER.CHECKPOINT_PERIOD = 20
# Images per batch across all processes.
_C.SOLVER.IMS_PER_BATCH = 64

_C.SOLVER.CLIP_GRADIENTS = CN({"ENABLED": False})
# "value" or "norm".
_C.SOLVER.CLIP_GRADIENTS.CLIP_TYPE = "norm"
_C.SOLVER.CLIP_GRADIENTS.CLIP_VALUE = 5.0
_C.SOLVER.CLIP_GRADIENTS.NORM_TYPE = 2.0


# ---------------------------------------------------------------------------- #
# TEST
# ---------------------------------------------------------------------------- #
_C.TEST = CN()
# Evaluate every this many epochs.
_C.TEST.EVAL_PERIOD = 20
_C.TEST.IMS_PER_BATCH = 64
# "cosine" or "euclidean".
_C.TEST.METRIC = "cosine"
_C.TEST.ROC = CN({"ENABLED": False})
_C.TEST.FLIP = CN({"ENABLED": False})

_C.TEST.AQE = CN({"ENABLED": False})
_C.TEST.AQE.ALPHA = 3.0
_C.TEST.AQE.QE_TIME = 1
_C.TEST.AQE.QE_K = 5

_C.TEST.RERANK = CN({"ENABLED": False})
_C.TEST.RERANK.K1 = 20
_C.TEST.RERANK.K2 = 6
_C.TEST.RERANK.LAMBDA = 0.3

_C.TEST.PRECISE_BN = CN({"ENABLED": False})
_C.TEST.PRECISE_BN.DATASET = "Market1501"
_C.TEST.PRECISE_BN.NUM_ITER = 300

# ---------------------------------------------------------------------------- #
# Misc
# ---------------------------------------------------------------------------- #
_C.OUTPUT_DIR = "logs/"
# Let cuDNN pick the fastest algorithms (fast, not bit-reproducible).
_C.CUDNN_BENCHMARK = False


def _leaf_names(node: CN, prefix: str = "") -> set[str]:
    names: set[str] = set()
    for key, value in node.items():
        if isinstance(value, CN):
            names |= _leaf_names(value, f"{prefix}{key}.")
        else:
            names.add(f"{prefix}{key}")
    return names


_UPSTREAM_LEAVES = _leaf_names(_C)

# -----------------------------------------------------------------------------
# The keys upstream does not have ([fastreid])
# -----------------------------------------------------------------------------
add_fastreid_keys(_C)

#: The full names of the keys :func:`add_fastreid_keys` adds (upstream FastReID has none of them):
#: a run saves them beside its ``config.yaml``, not in it (:mod:`fastreid.config.saved`).
FASTREID_KEYS = frozenset(_leaf_names(_C) - _UPSTREAM_LEAVES)

# Keys whose value may have any of several types (a default's type is always allowed). An int
# MODEL.BACKBONE.DEPTH N (or "N") is kept as upstream's spelling "Nx" (what every backbone reads it as).
MULTI_TYPE_KEYS = {
    "DATALOADER.PIN_MEMORY": (str, bool),
    "DATALOADER.PERSISTENT_WORKERS": (str, bool),
    "DATALOADER.BACKGROUND_GENERATOR": (str, bool),
    "MODEL.CHANNELS_LAST": (str, bool),
    "MODEL.BACKBONE.DEPTH": (str, int),
    "MODEL.HEADS.SCALE": (int, float),
    "MODEL.LOSSES.FL.GAMMA": (int, float),
    "MODEL.LOSSES.CIRCLE.GAMMA": (int, float),
    "MODEL.LOSSES.COSFACE.GAMMA": (int, float),
}
