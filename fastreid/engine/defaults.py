"""The standard workflow: the command line (``default_argument_parser``), the job setup
(``default_setup``), features from a config and its weights (``DefaultPredictor``) and training
with the standard hooks (``DefaultTrainer``), as upstream's ``fastreid.engine.defaults``.

``DefaultTrainer``'s ``build_*`` class methods, ``test`` and ``auto_scale_hyperparams`` are the
places to override; training, evaluation, resume and every hook go through them.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Optional

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fastreid.config import CfgNode, ensure_output_dir, validate_config
from fastreid.config.saved import save_config
from fastreid.data.build import build_reid_test_loader, build_reid_train_loader
from fastreid.evaluation import ReidEvaluator, inference_on_dataset, print_csv_format
from fastreid.modeling import build_model
from fastreid.modeling.compile import apply_model_options, optimize_for_inference
from fastreid.solver import build_lr_scheduler, build_optimizer, optimizer_and_wrapper
from fastreid.utils import comm
from fastreid.utils.checkpoint import Checkpointer, unwrap_model
from fastreid.utils.collect_env import collect_env_info
from fastreid.utils.device import resolve_device
from fastreid.utils.errors import CheckpointError
from fastreid.utils.events import CommonMetricPrinter, EventStorage, JSONWriter, TensorboardXWriter
from fastreid.utils.logger import setup_logger
from fastreid.utils.precision import precision_of_cfg
from fastreid.utils.reproducibility import set_seed
from fastreid.utils.rng import capture_rng_states, restore_rng_states
from fastreid.utils.safe_load import load_torch_file, set_checkpoint_trust

from . import hooks
from .train_loop import AMPTrainer, HookBase, SimpleTrainer, TrainerBase

__all__ = [
    "DefaultPredictor",
    "DefaultTrainer",
    "default_argument_parser",
    "default_setup",
    "inference_runner",
    "num_classes_in_checkpoint",
    "write_config",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------- command line


def default_argument_parser() -> argparse.ArgumentParser:
    """Upstream's arguments plus fastreid's (``--trust-checkpoint``, ``--dist-timeout``,
    ``--break-lock``, ``--cuda-launch-blocking``); trailing ``KEY VALUE`` pairs override the config."""
    parser = argparse.ArgumentParser(
        description="fastreid training",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "Examples:\n"
            "  python tools/train_net.py --config-file configs/Market1501/bagtricks_R50.yml\n"
            "  python tools/train_net.py --config-file cfg.yml --resume\n"
            "  python tools/train_net.py --config-file cfg.yml --eval-only MODEL.WEIGHTS model_final.pth\n"
            "  python tools/train_net.py --config-file cfg.yml --num-gpus 2 SOLVER.IMS_PER_BATCH 128\n"
        ),
    )
    parser.add_argument("--config-file", default="", metavar="FILE", help="path to the config file")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUTPUT_DIR/last_checkpoint when it exists"
    )
    parser.add_argument("--eval-only", action="store_true", help="evaluate MODEL.WEIGHTS, no training")
    parser.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="allow checkpoint files that need full unpickling (can run code from the file); "
        "same as MODEL.TRUST_CHECKPOINT True",
    )
    parser.add_argument(
        "--num-gpus", type=int, default=1, help="processes per machine (one per GPU; gloo processes on a CPU)"
    )
    parser.add_argument("--num-machines", type=int, default=1, help="number of machines")
    parser.add_argument(
        "--machine-rank", type=int, default=0, help="rank of this machine (0 .. num-machines-1)"
    )
    parser.add_argument(
        "--dist-url",
        default="auto",
        help="rendezvous: 'auto' (free local port), tcp://HOST:PORT, or env:// under torchrun",
    )
    parser.add_argument(
        "--dist-timeout",
        type=float,
        default=30.0,
        metavar="MINUTES",
        help="how long a process waits for the others in a collective before giving up (a lost process "
        "is usually noticed at once; NCCL may need this timeout)",
    )
    parser.add_argument(
        "--break-lock",
        action="store_true",
        help="take over OUTPUT_DIR even if its lock file names a running process (one on another host "
        "that is gone); a dead process's lock on this host is taken over without it",
    )
    parser.add_argument(
        "--cuda-launch-blocking",
        action="store_true",
        help="set CUDA_LAUNCH_BLOCKING=1 (CUDA errors point at the right line; much slower)",
    )
    parser.add_argument(
        "opts", help="config overrides as KEY VALUE pairs", default=None, nargs=argparse.REMAINDER
    )
    return parser


# ---------------------------------------------------------------------------------- job setup


def _shared_seed(seed: int) -> int:
    """A negative seed becomes a fresh one, the same on every rank."""
    if seed >= 0:
        return seed
    fresh = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
    return int(comm.all_gather(fresh)[0])


def write_config(cfg: CfgNode, output_dir: str) -> str:
    """Save the full config as ``output_dir/config.yaml`` (upstream's keys, which upstream FastReID's
    ``get_cfg()`` merges) and ``config.fastreid.yaml`` beside it (this package's keys), through
    :func:`fastreid.config.saved.save_config`; returns the path of ``config.yaml``."""
    return save_config(cfg, os.path.join(output_dir, "config.yaml"))[0]


def default_setup(cfg: CfgNode, args: Any) -> None:
    """Prepare a job: OUTPUT_DIR, logger (console + OUTPUT_DIR/log.txt), the environment and
    config logged and saved (``config.yaml``, ``env.txt``), ``MODEL.DEVICE`` fallback, seeding
    (``SEED``, ``DETERMINISTIC``, ``CUDNN_BENCHMARK``)."""
    validate_config(cfg, comm.get_world_size())
    set_checkpoint_trust(cfg.MODEL.TRUST_CHECKPOINT)
    output_dir = cfg.OUTPUT_DIR
    if comm.is_main_process() and output_dir:
        ensure_output_dir(output_dir)
    rank = comm.get_rank()
    setup_logger(output_dir, distributed_rank=rank, name="fvcore")
    log = setup_logger(output_dir, distributed_rank=rank)
    backend = f" (process group: {torch.distributed.get_backend()})" if comm.is_dist_initialized() else ""
    log.info(f"Rank of current process: {rank}. World size: {comm.get_world_size()}{backend}")

    env_info = collect_env_info()
    log.info("Environment info:\n" + env_info)
    log.info(f"Command line arguments: {args}")
    config_file = getattr(args, "config_file", "")
    if config_file:
        with open(config_file, encoding="utf-8") as f:
            log.info(f"Contents of args.config_file={config_file}:\n{f.read()}")

    resolve_device(cfg)
    frozen = cfg.is_frozen()
    cfg.defrost()
    cfg.SEED = _shared_seed(cfg.SEED)
    if frozen:
        cfg.freeze()
    log.info(f"Running with full config:\n{cfg}")
    if comm.is_main_process() and output_dir:
        path = write_config(cfg, output_dir)
        with open(os.path.join(output_dir, "env.txt"), "w", encoding="utf-8") as f:
            f.write(env_info + "\n")
        log.info(f"Full config saved to {os.path.abspath(path)}")

    seeded = set_seed(
        cfg.SEED, cfg.DETERMINISTIC, cfg.CUDNN_BENCHMARK and not getattr(args, "eval_only", False)
    )
    log.info(
        f"Seed {seeded['seed']} (deterministic algorithms: {seeded['deterministic']}, "
        f"cuDNN benchmark: {seeded['cudnn_benchmark']})"
    )


# ---------------------------------------------------------------------------------- predictor


def num_classes_in_checkpoint(path: str) -> int:
    """Rows of the classifier (``heads.weight``) saved in checkpoint ``path``; 0 when unknown.

    A config used for inference often says ``MODEL.HEADS.NUM_CLASSES: 0`` (set from the training
    set at training time); the classifier is unused for features but must match to load strictly.
    """
    try:
        state = load_torch_file(path, description="MODEL.WEIGHTS")
    except CheckpointError:
        return 0  # the Checkpointer reports what is wrong with the file
    state = state.get("model", state) if isinstance(state, Mapping) else {}
    weight = state.get("heads.weight", state.get("module.heads.weight"))
    return int(weight.shape[0]) if isinstance(weight, torch.Tensor) and weight.dim() == 2 else 0


def _inference_config(cfg: CfgNode) -> CfgNode:
    """A copy of ``cfg`` for inference: no backbone download, classifier size from the weights,
    ``MODEL.DEVICE`` resolved (CUDA missing -> CPU with one log line)."""
    cfg = cfg.clone()
    cfg.defrost()
    cfg.MODEL.BACKBONE.PRETRAIN = False
    weights = cfg.MODEL.WEIGHTS
    if weights and "://" not in weights and not os.path.isfile(weights):
        raise CheckpointError(f"MODEL.WEIGHTS {weights!r}: no such file")
    if weights and cfg.MODEL.HEADS.NUM_CLASSES == 0:
        cfg.MODEL.HEADS.NUM_CLASSES = num_classes_in_checkpoint(weights) or 1
    resolve_device(cfg)
    cfg.freeze()
    return cfg


class DefaultPredictor:
    """A model in eval mode with ``MODEL.WEIGHTS`` loaded, called on a batch of images::

        predictor = DefaultPredictor(cfg)
        features = predictor(images)  # N x 3 x H x W, RGB, 0..255 -> N x D on the CPU

    As upstream: the model is built without downloading backbone weights; the images must
    already be resized to ``INPUT.SIZE_TEST`` (:class:`fastreid.inference.FeatureExtractor` does
    that, and batching, for paths, PIL images and arrays). Features are the model's, float32, not
    L2-normalised. ``self.cfg`` is the config actually used (a frozen copy); without
    ``MODEL.WEIGHTS`` the model keeps its random initialisation (a warning says so).

    The forward runs as the evaluation's does: under the precision decision (``self.precision``,
    :mod:`fastreid.utils.precision`: bfloat16 autocast on a CPU that has it natively, channels-last
    memory on the CPU) on an inference copy of ``self.model`` with its BatchNorms folded
    (``TEST.FOLD_BN``). The copy is made again when ``self.model`` or any of its tensors changes.
    """

    def __init__(self, cfg: CfgNode) -> None:
        self.cfg = _inference_config(cfg)
        self.model: nn.Module = build_model(self.cfg, log_summary=False)
        self.model.eval()
        if self.cfg.MODEL.WEIGHTS:
            Checkpointer(self.model).load(self.cfg.MODEL.WEIGHTS)
        else:
            logger.warning("MODEL.WEIGHTS is empty: the predictor uses a randomly initialised model")
        self.precision = precision_of_cfg(self.cfg, self.device.type)
        self._inference: Optional[tuple[tuple[int, ...], nn.Module]] = None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def inference_model(self) -> nn.Module:
        """The module the forward runs: the folded copy of ``self.model`` (made again when
        ``self.model`` or one of its tensors changed since), or ``self.model`` itself in the
        decided memory format when ``TEST.FOLD_BN`` is False."""
        if not self.cfg.TEST.FOLD_BN:
            if self.precision.channels_last:
                self.model.to(memory_format=torch.channels_last)
            return self.model
        tensors = itertools.chain(self.model.parameters(), self.model.buffers())
        fingerprint = (id(self.model), *(t._version for t in tensors))
        if self._inference is None or self._inference[0] != fingerprint:
            self._inference = (fingerprint, optimize_for_inference(self.model, self.precision))
        return self._inference[1]

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Features (float32, on the CPU) of ``images``: N x 3 x H x W, RGB, uint8 or float on 0..255."""
        model = self.inference_model()
        inputs: dict[str, Any] = {"images": images.to(self.device, non_blocking=True)}
        with torch.no_grad(), self.precision.autocast(training=False):
            features = model(inputs)
        return features.to("cpu", torch.float32)


# ------------------------------------------------------------------------------------ trainer


def _train_set_size_and_classes(data_loader: Any) -> tuple[int, int]:
    """The number of training samples and of identities, from the train loader's dataset."""
    dataset = getattr(data_loader, "dataset", None)
    if dataset is None:
        raise TypeError("The train loader has no .dataset; build_train_loader must return a DataLoader")
    num_classes = getattr(dataset, "num_classes", None)
    if num_classes is None:
        raise TypeError(
            f"The train loader's dataset ({type(dataset).__name__}) has no num_classes; "
            "it is needed for MODEL.HEADS.NUM_CLASSES 0"
        )
    return len(dataset), int(num_classes)


def _device_type(model: nn.Module) -> str:
    tensor = next(model.parameters(), None)
    return tensor.device.type if tensor is not None else "cpu"


def _shutdown(data_loader: Any) -> None:
    """Stop a loader's workers now (DataLoaderX has ``shutdown``; other loaders are left alone)."""
    shutdown = getattr(data_loader, "shutdown", None)
    if callable(shutdown):
        shutdown()


def inference_runner(cfg: CfgNode, model: nn.Module, precision: Any) -> nn.Module:
    """What the evaluation runs for ``model``: an inference copy with its BatchNorms folded in the
    decided memory format (``TEST.FOLD_BN``), or ``model`` itself. ``model`` is not modified."""
    return optimize_for_inference(model, precision) if cfg.TEST.get("FOLD_BN", True) else model


class DefaultTrainer(TrainerBase):
    """Training with the standard workflow::

        trainer = DefaultTrainer(cfg)
        trainer.resume_or_load(resume=args.resume)  # last checkpoint, or MODEL.WEIGHTS
        trainer.train()

    Built from the config, in upstream's order and through the class methods a subclass
    overrides: the train loader, the config adjusted to it (``auto_scale_hyperparams``), the
    model, the optimizer (and upstream's ``param_wrapper``), the trainer of one iteration
    (``SimpleTrainer``, or ``AMPTrainer`` where the precision decision of
    :mod:`fastreid.utils.precision` says autocast: bfloat16 on a CPU that has it natively,
    float16 on CUDA with ``SOLVER.AMP.ENABLED``), the LR schedules, the
    checkpointer and the hooks (``build_hooks``). Epochs as upstream counts them:
    ``iters_per_epoch = len(train set) // SOLVER.IMS_PER_BATCH``,
    ``max_iter = MAX_EPOCH * iters_per_epoch`` (or ``SOLVER.MAX_ITER`` when > 0).

    Checkpoints hold upstream's entries (``model``, ``optimizer``, ``lr_sched``,
    ``warmup_sched``, ``epoch``, ``iteration``) and ``trainer``: the iteration, the RNG states and
    every hook's state, so that ``--resume`` continues exactly where a run stopped.
    """

    # Upstream-style subclasses may replace __init__ and set only upstream's attributes.
    _pending_rng_states: Optional[dict] = None
    _last_eval_results: Optional[dict] = None
    _state_loaded = False  # whether load_state_dict ran (the checkpointer calls it for "trainer")

    def __init__(self, cfg: CfgNode) -> None:
        super().__init__()
        base_logger = logging.getLogger("fastreid")
        if not base_logger.isEnabledFor(logging.INFO) or not base_logger.handlers:
            setup_logger()
        resolve_device(cfg)

        data_loader = self.build_train_loader(cfg)
        train_size, num_classes = _train_set_size_and_classes(data_loader)
        cfg = self.auto_scale_hyperparams(cfg, num_classes)
        model = self.build_model(cfg)
        optimizer, param_wrapper = optimizer_and_wrapper(self.build_optimizer(cfg, model))
        if comm.get_world_size() > 1:
            device_ids = [comm.get_local_rank()] if next(model.parameters()).is_cuda else None
            model = DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)

        # the precision decision (MODEL.PRECISION, SOLVER.AMP.ENABLED, the CPU): autocast or not
        precision = precision_of_cfg(cfg, _device_type(model))
        self._trainer: SimpleTrainer
        if precision.train_dtype is not None:
            self._trainer = AMPTrainer(
                model, data_loader, optimizer, param_wrapper, amp_dtype=precision.train_dtype
            )
        else:
            self._trainer = SimpleTrainer(model, data_loader, optimizer, param_wrapper)

        self.iters_per_epoch = max(1, train_size // cfg.SOLVER.IMS_PER_BATCH)
        self.scheduler = self.build_lr_scheduler(cfg, optimizer, self.iters_per_epoch)

        # upstream's checkpoint entries (model, optimizer, lr_sched, warmup_sched), the scaler,
        # and the trainer's own state (iteration, RNG states, each hook's state)
        checkpointables: dict[str, Any] = {"optimizer": optimizer, **self.scheduler}
        if self._trainer.grad_scaler is not None:
            checkpointables["grad_scaler"] = self._trainer.grad_scaler
        checkpointables["trainer"] = self
        self.checkpointer = Checkpointer(
            model,
            cfg.OUTPUT_DIR,
            save_to_disk=comm.is_main_process(),
            strict_load=cfg.MODEL.WEIGHTS_STRICT,
            **checkpointables,
        )

        self.start_iter = 0
        self.max_iter = (
            cfg.SOLVER.MAX_ITER if cfg.SOLVER.MAX_ITER > 0 else cfg.SOLVER.MAX_EPOCH * self.iters_per_epoch
        )
        self.warmup_iters = cfg.SOLVER.WARMUP_ITERS
        self.delay_epochs = cfg.SOLVER.DELAY_EPOCHS
        self.cfg = cfg
        self.register_hooks(self.build_hooks())

    # ------------------------------------------------------------------ resume

    def resume_or_load(self, resume: bool = True) -> None:
        """With ``resume`` and a ``last_checkpoint`` in OUTPUT_DIR: load everything (model,
        optimizer, schedules, scaler, and through :meth:`load_state_dict` the iteration, RNG
        states and hook states) and continue after the saved iteration, with the sampler
        positioned there. Otherwise load ``MODEL.WEIGHTS`` (model only) and start at 0."""
        checkpoint = self.checkpointer.resume_or_load(self.cfg.MODEL.WEIGHTS, resume=resume)
        if not (resume and self.checkpointer.has_checkpoint()):
            return
        self._load_trainer_state(checkpoint)
        log = logging.getLogger("fastreid")
        if self.start_iter >= self.max_iter:
            log.info(
                f"The run in {self.cfg.OUTPUT_DIR} is complete ({self.max_iter} iterations); nothing to train "
                "(evaluate it again with --eval-only MODEL.WEIGHTS "
                f"{os.path.join(self.cfg.OUTPUT_DIR, 'model_final.pth')})"
            )
            return
        log.info(
            f"Resuming after iteration {self.start_iter} (epoch {self.start_iter // self.iters_per_epoch + 1})"
        )
        if self.start_iter > 0:
            self._reposition_train_loader(self.start_iter)

    def _load_trainer_state(self, checkpoint: dict[str, Any]) -> None:
        """The trainer state of a checkpoint the checkpointer did not load itself (a subclass's
        checkpointer without ``trainer``), or of one written before the trainer owned its state
        (or by upstream FastReID: ``iteration`` / ``epoch`` only)."""
        if "trainer" in checkpoint:
            self.load_state_dict(checkpoint["trainer"])
        if self._state_loaded:
            return
        if "iteration" in checkpoint:
            self.start_iter = self.iter = int(checkpoint["iteration"]) + 1
        elif "epoch" in checkpoint:  # upstream's epoch-based checkpoints
            self.start_iter = self.iter = (int(checkpoint["epoch"]) + 1) * self.iters_per_epoch
        self._pending_rng_states = checkpoint.get("rng_states")
        if self.plateau is not None and "plateau" in checkpoint:
            self.plateau.load_state_dict(checkpoint["plateau"])

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["rng_states"] = capture_rng_states()
        return state

    def load_state_dict(self, state: Any) -> None:
        super().load_state_dict(state)
        self._pending_rng_states = state.get("rng_states")
        self._state_loaded = True

    def _reposition_train_loader(self, start_iter: int) -> None:
        params = inspect.signature(self.build_train_loader).parameters
        if "start_iter" not in params:
            logging.getLogger("fastreid").warning(
                f"{type(self).__name__}.build_train_loader takes no start_iter; the resumed run "
                "starts a new sampler epoch instead of continuing the interrupted one"
            )
            return
        old = self._trainer.data_loader
        self._trainer.reset_data_loader(self.build_train_loader(self.cfg, start_iter=start_iter))
        _shutdown(old)

    # ------------------------------------------------------------------ training

    def before_train(self) -> None:
        super().before_train()
        # The loader iterator draws a seed from torch's global RNG when created; create it
        # before restoring the saved RNG states so the resumed stream matches the original.
        _ = self._trainer._data_loader_iter
        if self._pending_rng_states is not None:
            restore_rng_states(self._pending_rng_states)
            self._pending_rng_states = None

    def after_train(self) -> None:
        try:
            super().after_train()
        finally:
            _shutdown(self._trainer.data_loader)

    def train(self) -> Optional[dict]:  # type: ignore[override]  # upstream's API: no arguments, the range comes from cfg
        """Train from ``start_iter`` to ``max_iter``; returns the last evaluation results.

        Checkpoints are written before evaluations; an evaluation that failed is reported
        (:class:`~fastreid.engine.hooks.EvaluationFailedError`) once training and its checkpoints
        are done. A run resumed after its last iteration does nothing."""
        if self.start_iter < self.max_iter:
            super().train(
                self.start_epoch,
                self.max_epoch,
                self.iters_per_epoch,
                start_iter=self.start_iter,
                max_iter=self.max_iter,
            )
        elif any(h.pending() for h in self._hooks if isinstance(h, hooks.EvalHook)):
            self._run_pending_final_evaluation()
        else:
            return None
        self._record_final_state()
        failures = [f for h in self._hooks if isinstance(h, hooks.EvalHook) for f in h.failures]
        if failures:
            itr, message = failures[-1]
            saved = f"; the weights are saved in {self.cfg.OUTPUT_DIR}" if self.cfg.OUTPUT_DIR else ""
            raise hooks.EvaluationFailedError(
                f"{len(failures)} evaluation(s) failed, the last after iteration {itr + 1}: {message}{saved}. "
                "Fix the cause and evaluate with --eval-only MODEL.WEIGHTS "
                f"{os.path.join(self.cfg.OUTPUT_DIR, 'model_final.pth')}"
            )
        return self._last_eval_results

    def _record_final_state(self) -> None:
        """model_final.pth is written before the final evaluation; once that evaluation is over,
        the trainer state (evaluation done, best metric, plateau) goes next to it as an update
        (:meth:`~fastreid.utils.checkpoint.Checkpointer.save_update`), so that ``--resume`` of the
        finished run knows there is nothing left to do, without writing the weights again."""
        checkpointer = self.checkpointer
        if not (comm.is_main_process() and checkpointer.save_dir and isinstance(checkpointer, Checkpointer)):
            return
        if os.path.basename(checkpointer.get_checkpoint_file()) == "model_final.pth":
            checkpointer.save_update("model_final", trainer=self.state_dict())

    def _run_pending_final_evaluation(self) -> None:
        """The run finished training but was stopped or killed in its final evaluation (which
        runs after the final checkpoint): evaluate now, with the hooks that use the results."""
        logging.getLogger("fastreid").info("Running the final evaluation, which the run did not finish")
        self.iter = self.start_iter - 1
        after_eval = (hooks.PreciseBN, hooks.EvalHook, hooks.PlateauHook, hooks.BestCheckpointer)
        with EventStorage(self.start_iter) as self.storage:
            for h in self._hooks:
                if isinstance(h, after_eval):
                    h.before_train()
            for h in self._hooks:
                if isinstance(h, hooks.PeriodicWriter):
                    h.after_train()
            for h in self._hooks:
                if isinstance(h, hooks.RunReport):
                    h.write()

    def run_step(self) -> None:
        self._trainer.iter = self.iter
        self._trainer.iters_per_epoch = self.iters_per_epoch
        self._trainer.run_step()

    # ------------------------------------------------------------------ hooks

    def build_hooks(self) -> list[HookBase]:
        """Timing, LR schedule, precise BN, layer freezing, checkpoints, evaluation, plateau
        detection, the best model and the writers, in the order they must run."""
        cfg = self.cfg
        ret: list[Optional[HookBase]] = [
            hooks.IterationTimer(),
            hooks.LRScheduler(self.optimizer, self.scheduler),
        ]
        if cfg.TEST.PRECISE_BN.ENABLED and hooks.get_bn_modules(unwrap_model(self.model)):
            ret.append(
                hooks.PreciseBN(
                    self.model,
                    None,
                    cfg.TEST.PRECISE_BN.NUM_ITER,
                    cfg.TEST.EVAL_PERIOD,
                    data_loader_factory=self._precise_bn_loader,
                )
            )
        if len(cfg.MODEL.FREEZE_LAYERS) > 0 and cfg.SOLVER.FREEZE_ITERS > 0:
            ret.append(hooks.LayerFreeze(self.model, cfg.MODEL.FREEZE_LAYERS, cfg.SOLVER.FREEZE_ITERS))

        def test_and_save_results() -> Any:
            self._last_eval_results = self.test(self.cfg, self.model)
            return self._last_eval_results

        # Checkpoints first: whatever evaluation does, the weights are on disk before it runs.
        # The plateau hook and the best model use the evaluation's results, so they follow it.
        if comm.is_main_process():
            ret.append(
                hooks.PeriodicCheckpointer(
                    self.checkpointer,
                    cfg.SOLVER.CHECKPOINT_PERIOD,
                    minutes=cfg.SOLVER.CHECKPOINT_MINUTES,
                    keep=cfg.SOLVER.CHECKPOINT_KEEP,
                    save_on_stop=True,
                )
            )
        ret.append(hooks.EvalHook(cfg.TEST.EVAL_PERIOD, test_and_save_results))
        plateau = cfg.SOLVER.PLATEAU
        if plateau.ENABLED:
            ret.append(
                hooks.PlateauHook(
                    self.optimizer,
                    plateau.PATIENCE,
                    plateau.FACTOR,
                    plateau.MIN_LR,
                    plateau.METRIC,
                    schedulers=self.scheduler,
                )
            )
        if comm.is_main_process():
            ret.append(hooks.BestCheckpointer(self.checkpointer, "metric"))
            ret.append(hooks.PeriodicWriter(self.build_writers(), cfg.SOLVER.LOG_PERIOD))
            if cfg.TEST.get("REPORT", True) and cfg.OUTPUT_DIR:
                ret.append(hooks.RunReport(cfg.OUTPUT_DIR))  # reads what the writers wrote
        return [h for h in ret if h is not None]

    def _precise_bn_loader(self) -> Any:
        cfg = self.cfg.clone()
        cfg.defrost()
        cfg.DATALOADER.NUM_WORKERS = 0
        cfg.DATASETS.NAMES = (cfg.TEST.PRECISE_BN.DATASET,)
        return self.build_train_loader(cfg)

    def build_writers(self) -> list:
        """The metric writers: the console, ``metrics.json`` and TensorBoard."""
        return [
            CommonMetricPrinter(self.max_iter, self.iters_per_epoch),
            JSONWriter(os.path.join(self.cfg.OUTPUT_DIR, "metrics.json")),
            TensorboardXWriter(self.cfg.OUTPUT_DIR),
        ]

    @property
    def report_path(self) -> Optional[str]:
        """The run report written at the end of training (``TEST.REPORT``), or None."""
        report = next((h for h in self._hooks if isinstance(h, hooks.RunReport)), None)
        return report.path if report is not None else None

    @property
    def plateau(self) -> Optional[hooks.PlateauHook]:
        """The plateau hook (``SOLVER.PLATEAU.ENABLED``), or None."""
        return next((h for h in self._hooks if isinstance(h, hooks.PlateauHook)), None)

    # ------------------------------------------------------------------ the underlying trainer

    @property
    def model(self) -> nn.Module:
        return self._trainer.model

    @property
    def data_loader(self) -> Any:
        return self._trainer.data_loader

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._trainer.optimizer

    @property
    def grad_scaler(self) -> Any:
        return getattr(self._trainer, "grad_scaler", None)

    @property
    def frozen_parameters(self) -> list:
        return self._trainer.frozen_parameters

    @frozen_parameters.setter
    def frozen_parameters(self, params: list) -> None:
        self._trainer.frozen_parameters = params

    # ------------------------------------------------------------------ builders (class methods)

    @classmethod
    def build_model(cls, cfg: CfgNode) -> nn.Module:
        """:func:`fastreid.modeling.build_model` with ``MODEL.COMPILE`` / ``MODEL.CHANNELS_LAST``."""
        model = apply_model_options(cfg, build_model(cfg))
        logger.debug(f"Model:\n{model}")
        return model

    @classmethod
    def build_optimizer(cls, cfg: CfgNode, model: nn.Module) -> Any:
        """:func:`fastreid.solver.build_optimizer`: upstream's ``(optimizer, param_wrapper)``; an
        override may return that pair or an optimizer alone."""
        return build_optimizer(cfg, model)

    @classmethod
    def build_lr_scheduler(cls, cfg: CfgNode, optimizer: torch.optim.Optimizer, iters_per_epoch: int) -> dict:
        """:func:`fastreid.solver.build_lr_scheduler`: ``{"lr_sched": ..., "warmup_sched": ...}``."""
        return build_lr_scheduler(cfg, optimizer, iters_per_epoch)

    @classmethod
    def build_train_loader(cls, cfg: CfgNode, start_iter: int = 0) -> Any:
        """:func:`fastreid.data.build.build_reid_train_loader`; ``start_iter`` positions the
        sampler of a resumed run (an override without it starts a new sampler epoch)."""
        logger.info("Prepare training set")
        return build_reid_train_loader(cfg, start_iter=start_iter)

    @classmethod
    def build_test_loader(cls, cfg: CfgNode, dataset_name: str) -> Any:
        """``(data_loader, num_query)`` of :func:`fastreid.data.build.build_reid_test_loader`."""
        return build_reid_test_loader(cfg, dataset_name=dataset_name)

    @classmethod
    def build_evaluator(cls, cfg: CfgNode, dataset_name: str, output_dir: Optional[str] = None) -> Any:
        """``(data_loader, evaluator)`` for one data set of ``DATASETS.TESTS``."""
        data_loader, num_query = cls.build_test_loader(cfg, dataset_name)
        return data_loader, ReidEvaluator(cfg, num_query, output_dir, dataset_name=dataset_name)

    @classmethod
    def test(cls, cfg: CfgNode, model: nn.Module) -> dict:
        """Evaluate on every data set of ``DATASETS.TESTS`` with :meth:`build_evaluator`; a single
        data set's results are returned flat (upstream's shape). A ``build_evaluator`` that raises
        ``NotImplementedError`` gives that data set empty results.

        The forward runs under the precision decision's autocast (:mod:`fastreid.utils.precision`)
        on an inference copy of ``model`` with its BatchNorms folded (``TEST.FOLD_BN``); ``model``
        itself is not modified."""
        model = unwrap_model(model)
        precision = precision_of_cfg(cfg, _device_type(model))
        runner: Optional[nn.Module] = None  # the inference copy, made once the first data set is ready
        results: OrderedDict = OrderedDict()
        for dataset_name in cfg.DATASETS.TESTS:
            logger.info(f"Prepare testing set {dataset_name}")
            try:
                data_loader, evaluator = cls.build_evaluator(cfg, dataset_name)
            except NotImplementedError:
                logger.warning(f"No evaluator for {dataset_name}: implement {cls.__name__}.build_evaluator")
                results[dataset_name] = {}
                continue
            try:
                if runner is None:
                    runner = inference_runner(cfg, model, precision)
                results_i = inference_on_dataset(
                    runner, data_loader, evaluator, flip_test=cfg.TEST.FLIP.ENABLED, precision=precision
                )
            finally:
                _shutdown(data_loader)
            results[dataset_name] = results_i
            if comm.is_main_process():
                if not isinstance(results_i, Mapping):
                    raise TypeError(
                        f"{type(evaluator).__name__}.evaluate() must return a dict on the main process, "
                        f"got {type(results_i).__name__}"
                    )
                if results_i:
                    print_csv_format({dataset_name: results_i})
        if len(results) == 1:
            results = next(iter(results.values()))
        return results

    @staticmethod
    def auto_scale_hyperparams(cfg: CfgNode, num_classes: int) -> CfgNode:
        """``MODEL.HEADS.NUM_CLASSES`` 0 becomes the number of training identities (and the saved
        config.yaml is updated)."""
        cfg = cfg.clone()
        frozen = cfg.is_frozen()
        cfg.defrost()
        if cfg.MODEL.HEADS.NUM_CLASSES == 0:
            cfg.MODEL.HEADS.NUM_CLASSES = num_classes
            logger.info(f"Auto-scaling the num_classes={num_classes}")
            if comm.is_main_process() and cfg.OUTPUT_DIR:
                write_config(cfg, cfg.OUTPUT_DIR)
        if frozen:
            cfg.freeze()
        return cfg
