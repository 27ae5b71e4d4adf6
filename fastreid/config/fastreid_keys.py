"""The keys this project adds to upstream FastReID's defaults (upstream has none of them).

:mod:`fastreid.config.defaults` defines upstream's keys and calls :func:`add_fastreid_keys` on its
``_C``; ``get_cfg()`` sees one tree. Every key here has a comment marked ``[fastreid]``. A new key
that upstream does not have goes here, in its section; upstream's keys stay in ``defaults.py``.
A run saves these keys beside its ``config.yaml``, in ``config.fastreid.yaml``
(:mod:`fastreid.config.saved`), so upstream FastReID reads ``config.yaml`` unchanged.
"""

# fvcore's node, as in defaults.py: this module is data and imports nothing of fastreid.
from fvcore.common.config import CfgNode as CN

__all__ = ["add_fastreid_keys"]


def add_fastreid_keys(_C: CN) -> None:
    """Add fastreid's keys to ``_C``, a tree that holds upstream's keys (its sections exist)."""
    # ---- MODEL: compilation, memory format, backbone options, checkpoint loading

    # [fastreid] torch.compile the model in place (same state-dict keys); off unless measured faster on
    # your machine: compilation takes tens of seconds before the first step. COMPILE_MODE is torch.compile's
    # mode ("default", "reduce-overhead", "max-autotune").
    _C.MODEL.COMPILE = False
    _C.MODEL.COMPILE_MODE = "default"
    # [fastreid] torch.compile backend: "inductor" (generates C++/Triton code; needs a compiler) or e.g.
    # "aot_eager" where no compiler is available.
    _C.MODEL.COMPILE_BACKEND = "inductor"
    # [fastreid] Precision of training, evaluation and inference: "auto" (bfloat16 autocast where the CPU
    # computes bfloat16 natively: AVX512_BF16, AMX-BF16 or ARM BF16; float32 where it would be emulated;
    # on CUDA, upstream's SOLVER.AMP.ENABLED decides), "fp32", or "bf16" (an error on a CPU without native
    # bfloat16). SOLVER.AMP.ENABLED does not change the CPU's choice. Logged once at start-up with its
    # reason; fastreid/utils/precision.py holds the rule.
    _C.MODEL.PRECISION = "auto"
    # [fastreid] Channels-last memory format of the model: "auto" (on the CPU, where it was measured faster
    # for float32 and bfloat16 alike, training and inference; off on CUDA and other devices) | True | False.
    _C.MODEL.CHANNELS_LAST = "auto"
    # [fastreid] GhostBN only: number of sub-batches whose statistics are computed separately.
    _C.MODEL.BACKBONE.NORM_SPLIT = 1
    # [fastreid] Inner channels of the non-local blocks: "upstream" (1 channel, what upstream's released
    # code builds and every released AGW/SBS checkpoint holds) or "half" (in_channels // 2, the paper's
    # choice; such models cannot load upstream's checkpoints).
    _C.MODEL.BACKBONE.NL_INTER_CHANNELS = "upstream"
    # [fastreid] ViT camera embedding (SIE): the number of cameras; 0 = off (upstream's builder never
    # turns it on). When > 1 the model passes each batch's camids to the backbone.
    _C.MODEL.BACKBONE.SIE_CAMERAS = 0
    # [fastreid] ViT size overrides; 0 = the DEPTH preset's ("small": 768 dims, 8 layers, 8 heads;
    # "base": 768, 12, 12). FEAT_DIM must equal the embedding dimension.
    _C.MODEL.BACKBONE.VIT_EMBED_DIM = 0
    _C.MODEL.BACKBONE.VIT_NUM_LAYERS = 0
    _C.MODEL.BACKBONE.VIT_NUM_HEADS = 0
    # [fastreid] Refuse a checkpoint (MODEL.WEIGHTS, --eval-only, --resume) that leaves model tensors
    # missing, unexpected or mis-shaped; classifier-only differences (another number of identities)
    # are always accepted. False: load what fits and log a table of the rest.
    _C.MODEL.WEIGHTS_STRICT = True
    # [fastreid] Allow checkpoint files that need full unpickling (which can run code from the file).
    # Off: such files are refused with one line; tensors, numbers and containers load either way.
    # Also set by --trust-checkpoint.
    _C.MODEL.TRUST_CHECKPOINT = False

    # ---- INPUT

    # [fastreid] Largest image (width x height, read from the file's header before decoding) that is
    # decoded; a larger one is refused naming the file (decompression bombs). Default: PIL's
    # Image.MAX_IMAGE_PIXELS. 0 = no limit.
    _C.INPUT.MAX_IMAGE_PIXELS = 89478485

    # ---- DATALOADER: the platform-safe loader

    # [fastreid] Start method of worker processes: "auto" | "fork" | "spawn" | "forkserver".
    # "auto": fork on Linux, spawn on macOS, Windows and ROCm.
    _C.DATALOADER.MP_CONTEXT = "auto"
    # [fastreid] True: no worker processes on Windows (thread workers or none instead), which
    # avoids error 1455, pickling errors and re-spawn costs. False allows persistent spawn workers.
    _C.DATALOADER.WINDOWS_SAFE = True
    # [fastreid] Thread workers of the main process. Used when worker processes are not (Windows,
    # CUDA state in the dataset, notebooks). 0 = none.
    _C.DATALOADER.NUM_THREADS = 0
    # [fastreid] "auto" (only when the model is on CUDA) | True | False.
    _C.DATALOADER.PIN_MEMORY = "auto"
    # [fastreid] Keep worker processes alive between epochs: "auto" (on with spawn/forkserver) | True | False.
    _C.DATALOADER.PERSISTENT_WORKERS = "auto"
    # [fastreid] Batches loaded in advance by each worker process.
    _C.DATALOADER.PREFETCH_FACTOR = 2
    # [fastreid] Prefetch batches in a background thread: "auto" (on where the policy finds it safe
    # and useful, e.g. zero worker processes feeding a CUDA model) | True | False.
    _C.DATALOADER.BACKGROUND_GENERATOR = "auto"
    # [fastreid] Seconds to wait for a batch from a worker process before ending with an error.
    _C.DATALOADER.TIMEOUT = 300
    # [fastreid] Decoded-image cache: images decoded and resized once into a uint8 memory map.
    _C.DATALOADER.CACHE = False
    # [fastreid] Folder of the cache; "" = a ".cache" folder inside the dataset's folder.
    _C.DATALOADER.CACHE_DIR = ""

    # ---- SOLVER: optimizer kernel, timed checkpoints, plateau detection, logging, iterations

    # [fastreid] torch's fused optimizer kernel (one pass over each tensor): "auto" uses it for
    # parameters on the CPU, where it was measured faster (Adam's step 2.7-3.7x), "on" wherever torch
    # has one (Adam, AdamW, SGD, Adagrad on CPU/CUDA), "off" keeps torch's default implementation.
    _C.SOLVER.FUSED = "auto"
    # [fastreid] Also save a checkpoint (model_iterNNNNNNN.pth) every this many minutes of training,
    # between the epoch checkpoints (SOLVER.CHECKPOINT_PERIOD); 0 turns it off.
    _C.SOLVER.CHECKPOINT_MINUTES = 30.0
    # [fastreid] How many of those timed checkpoints to keep (the oldest ones this run wrote are deleted).
    _C.SOLVER.CHECKPOINT_KEEP = 2
    # [fastreid] Plateau detection: after PATIENCE evaluations without improvement of the metric,
    # log it and, when FACTOR < 1, multiply the LR by FACTOR (never below MIN_LR).
    _C.SOLVER.PLATEAU = CN({"ENABLED": False})
    _C.SOLVER.PLATEAU.PATIENCE = 3
    _C.SOLVER.PLATEAU.FACTOR = 1.0
    _C.SOLVER.PLATEAU.MIN_LR = 1e-7
    # Metric watched: "metric" ((mAP + Rank-1) / 2), "mAP", "Rank-1", ...
    _C.SOLVER.PLATEAU.METRIC = "metric"
    # [fastreid] Iterations between two console / JSON log lines.
    _C.SOLVER.LOG_PERIOD = 20
    # [fastreid] Maximum iterations; 0 = derived from MAX_EPOCH and the data set size.
    _C.SOLVER.MAX_ITER = 0

    # ---- TEST

    # [fastreid] Count gallery items of the query's identity from the query's own camera as matches
    # (upstream always drops them as "junk"). Needed for single-camera or same-camera data sets, where
    # otherwise no query has a valid match; upstream's maintainers advise keeping them there.
    _C.TEST.KEEP_SAME_CAMERA = False
    # [fastreid] "knn_jaccard": upstream's evaluator (its kNN Jaccard distance combined with the plain
    # TEST.METRIC distance), reproduces upstream's numbers; "k_reciprocal": the classic re-ranking of
    # Zhong et al. (CVPR 2017). See docs/evaluation.md.
    _C.TEST.RERANK.METHOD = "knn_jaccard"
    # [fastreid] Evaluation and the feature extractor run a copy of the model with every BatchNorm that
    # follows a convolution folded into it (the trained model is untouched): measured 1.08-1.16x faster
    # on the CPU, the same features to float32 rounding. False runs the model itself.
    _C.TEST.FOLD_BN = True
    # [fastreid] Write the run report (OUTPUT_DIR/report.html: losses, metrics, curves, the worst and
    # best queries; fastreid.report) at the end of training and of --eval-only. A failure to write it
    # is a warning, never a failed run. fastreid-report writes it again at any time.
    _C.TEST.REPORT = True

    # ---- Reproducibility

    # [fastreid] Seed of python, numpy, torch, the samplers and the per-sample augmentation
    # generators. Same seed, same batches. Negative: a fresh seed is drawn and logged.
    _C.SEED = 42
    # [fastreid] Deterministic algorithms (torch.use_deterministic_algorithms) for bit-identical
    # GPU runs; slower.
    _C.DETERMINISTIC = False
