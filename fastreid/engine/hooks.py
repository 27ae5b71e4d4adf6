"""Training hooks: upstream's (callbacks, timing, writers, checkpoints, LR schedule, profiler,
evaluation, precise BatchNorm, layer freezing, SWA) and fastreid's (best model, plateau detection).

Order in :meth:`~fastreid.engine.defaults.DefaultTrainer.build_hooks`: precise BN, then the
checkpoints, then evaluation and the hooks that use its results (plateau, best model), then the
writers, then the run report (which reads what they wrote). Checkpoints come before evaluation: the weights are on disk before anything that may fail
looks at them. Hook bookkeeping (the timed checkpoints kept, the best metric so far, the last
evaluation) is hook state, saved inside every checkpoint through the trainer's ``state_dict``;
an evaluation the checkpoint was written before runs first thing after ``--resume``.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Optional, cast

import torch
from fvcore.common.timer import Timer
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts
from torch.optim.swa_utils import AveragedModel

from fastreid.evaluation.testing import flatten_results_dict
from fastreid.modeling.freeze import FrozenModulesMixin, freeze_modules, unfreeze_modules
from fastreid.utils import comm
from fastreid.utils.checkpoint import PeriodicCheckpointer as _PeriodicCheckpointer
from fastreid.utils.checkpoint import remove_checkpoint, unwrap_model
from fastreid.utils.errors import UserError
from fastreid.utils.events import EventStorage, EventWriter, JSONWriter
from fastreid.utils.precision_bn import get_bn_modules, update_bn_stats
from fastreid.utils.rng import rng_isolated
from fastreid.utils.safe_load import load_torch_file

from .train_loop import HookBase

__all__ = [
    "SWA",
    "AutogradProfiler",
    "BestCheckpointer",
    "CallbackHook",
    "EvalHook",
    "EvaluationFailedError",
    "IterationTimer",
    "LRScheduler",
    "LayerFreeze",
    "MetricHook",
    "PeriodicCheckpointer",
    "PeriodicWriter",
    "PlateauHook",
    "PreciseBN",
    "RunReport",
    "evaluation_due",
    "find_metric_key",
    "flatten_results_dict",
    "get_bn_modules",
    "write_run_report",
]

logger = logging.getLogger(__name__)


def evaluation_due(trainer: Any, iteration: int, period: int) -> bool:
    """Whether the epoch-end evaluation schedule (every ``period`` epochs and after the last
    one) evaluates after ``iteration``."""
    if iteration < 0 or (iteration + 1) % trainer.iters_per_epoch != 0:
        return False
    next_epoch = (iteration + 1) // trainer.iters_per_epoch
    return (period > 0 and next_epoch % period == 0) or next_epoch >= trainer.max_epoch


def find_metric_key(latest: Mapping[str, Any], name: str) -> Optional[str]:
    """``name`` itself or the first ``<prefix>/name`` among the storage's latest scalars."""
    if name in latest:
        return name
    for k in latest:
        if k.endswith("/" + name):
            return k
    return None


class EvaluationFailedError(UserError):
    """An evaluation raised; training went on and its checkpoints are on disk (exit code 3)."""

    exit_code = 3


# ---------------------------------------------------------------------------------------- basics


class CallbackHook(HookBase):
    """A hook made of functions, each called with the trainer (upstream's)."""

    def __init__(
        self,
        *,
        before_train: Optional[Callable[[Any], None]] = None,
        after_train: Optional[Callable[[Any], None]] = None,
        before_epoch: Optional[Callable[[Any], None]] = None,
        after_epoch: Optional[Callable[[Any], None]] = None,
        before_step: Optional[Callable[[Any], None]] = None,
        after_step: Optional[Callable[[Any], None]] = None,
    ) -> None:
        self._callbacks = {
            "before_train": before_train,
            "after_train": after_train,
            "before_epoch": before_epoch,
            "after_epoch": after_epoch,
            "before_step": before_step,
            "after_step": after_step,
        }

    def _call(self, stage: str) -> None:
        callback = self._callbacks[stage]
        if callback is not None:
            callback(self.trainer)

    def before_train(self) -> None:
        self._call("before_train")

    def after_train(self) -> None:
        self._call("after_train")
        # the functions are often closures holding the trainer: drop them (no reference cycle)
        self._callbacks = dict.fromkeys(self._callbacks)

    def before_epoch(self) -> None:
        self._call("before_epoch")

    def after_epoch(self) -> None:
        self._call("after_epoch")

    def before_step(self) -> None:
        self._call("before_step")

    def after_step(self) -> None:
        self._call("after_step")


class IterationTimer(HookBase):
    """Puts ``time`` (seconds per iteration, data loading included) in the storage; the trainer
    puts ``data_time``. At the end, logs the speed and how much of it went to waiting for data.
    The first ``warmup_iter`` iterations are not timed."""

    def __init__(self, warmup_iter: int = 3) -> None:
        self._warmup_iter = warmup_iter
        self._step_timer = Timer()
        self._data_time = 0.0
        self._step_time = 0.0

    def before_train(self) -> None:
        self._start_time = time.perf_counter()
        self._total_timer = Timer()
        self._total_timer.pause()

    def before_step(self) -> None:
        self._step_timer.reset()
        self._total_timer.resume()

    def after_step(self) -> None:
        done = self.trainer.iter - self.trainer.start_iter + 1
        sec = self._step_timer.seconds()
        if done > self._warmup_iter:
            self.trainer.storage.put_scalar("time", sec)
            with suppress(KeyError):
                self._data_time += self.trainer.storage.history("data_time").latest()
            self._step_time += sec
        else:
            self._start_time = time.perf_counter()
            self._total_timer.reset()
        self._total_timer.pause()

    def after_train(self) -> None:
        total = time.perf_counter() - self._start_time
        in_steps = self._total_timer.seconds()
        num_iter = self.trainer.iter + 1 - self.trainer.start_iter - self._warmup_iter
        if num_iter > 0 and in_steps > 0:
            share = 100.0 * self._data_time / self._step_time if self._step_time > 0 else 0.0
            logger.info(
                f"Overall training speed: {num_iter} iterations in "
                f"{datetime.timedelta(seconds=int(in_steps))} ({in_steps / num_iter:.4f} s / it); "
                f"waiting for data: {share:.1f}% of the step time, computing: {100.0 - share:.1f}%"
            )
        logger.info(
            f"Total training time: {datetime.timedelta(seconds=int(total))} "
            f"({datetime.timedelta(seconds=int(total - in_steps))} on hooks)"
        )


class PeriodicWriter(HookBase):
    """Runs the writers every ``period`` iterations, at the end of each epoch and at the end.

    Its state is the recent history of the smoothed scalars (a writer's window of losses and
    times): a resumed run puts it back, so that its medians are the unbroken run's. A resumed run
    first drops what the interrupted run wrote of the iterations it trains again
    (:meth:`~fastreid.utils.events.JSONWriter.discard_from`)."""

    def __init__(self, writers: Sequence[EventWriter], period: int = 20) -> None:
        for w in writers:
            assert isinstance(w, EventWriter), w
        self._writers = list(writers)
        self._period = max(1, int(period))
        self._saved_history: dict[str, list] = {}

    def _window(self) -> int:
        return max([int(getattr(w, "_window_size", 20)) for w in self._writers] + [1])

    def state_dict(self) -> dict[str, Any]:
        storage = getattr(self.trainer, "storage", None)
        if storage is None:
            return {}
        window, hints = self._window(), storage.smoothing_hints()
        history = {
            name: [[float(v), int(i)] for v, i in buffer.values()[-window:]]
            for name, buffer in storage.histories().items()
            if hints.get(name)
        }
        return {"history": history} if history else {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._saved_history = dict(state.get("history", {}))

    def before_train(self) -> None:
        start = int(getattr(self.trainer, "start_iter", 0))
        storage = self.trainer.storage
        if start > 0:
            # an evaluation due at the checkpoint ran again in before_train: its keys are new there
            again = {k for k, (_, itr) in storage.latest().items() if itr == start - 1}
            for w in self._writers:
                if isinstance(w, JSONWriter) and w.discard_from(start, again):
                    logger.info(
                        f"metrics.json: what the interrupted run wrote after its checkpoint (iteration "
                        f"{start}) is dropped; this run writes it again"
                    )
        for name, values in self._saved_history.items():
            storage.restore_history(name, [(float(v), int(i)) for v, i in values])
        self._saved_history = {}

    def _write(self) -> None:
        for w in self._writers:
            w.write()

    def after_step(self) -> None:
        if (self.trainer.iter + 1) % self._period == 0 or self.trainer.iter == self.trainer.max_iter - 1:
            self._write()

    def after_epoch(self) -> None:
        self._write()

    def after_train(self) -> None:
        self._write()
        for w in self._writers:
            w.close()


def write_run_report(output_dir: str) -> Optional[str]:
    """Write the run report of ``output_dir`` (``report.html``, :func:`fastreid.report.write_report`)
    on the main process and log ``Report: <path>``; returns the path, or None when nothing was
    written. Never raises: a report that cannot be written is a warning (the run's results stand)."""
    if not output_dir or not comm.is_main_process():
        return None
    try:
        from fastreid.report import write_report  # matplotlib and the page code: only when used

        path = os.path.abspath(write_report([output_dir]))
    except Exception as e:
        logger.debug("Traceback of the report error:", exc_info=True)
        message = " ".join(f"{type(e).__name__}: {e}".split())
        logger.warning(
            f"The run report was not written ({message}); the run is unaffected. Write it later with: "
            f"fastreid-report {output_dir}"
        )
        return None
    logger.info(f"Report: {path}")
    return path


class RunReport(HookBase):
    """Writes the run report (``OUTPUT_DIR/report.html``) once training has finished, after the
    writers have written ``metrics.json`` (register it after :class:`PeriodicWriter`). Nothing after
    an error or a stop signal. ``path`` is the report's, once written."""

    def __init__(self, output_dir: str) -> None:
        self._output_dir = output_dir
        self.path: Optional[str] = None

    def write(self) -> Optional[str]:
        self.path = write_run_report(self._output_dir) or self.path
        return self.path

    def after_train(self) -> None:
        if self.trainer.finished:
            self.write()


class LRScheduler(HookBase):
    """Steps ``scheduler["warmup_sched"]`` after every warmup iteration and
    ``scheduler["lr_sched"]`` after every epoch once the warmup iterations are done and
    ``delay_epochs`` have passed (upstream's rules); records ``lr``. ``warmup_iters`` and
    ``delay_epochs`` default to the trainer's (``SOLVER.WARMUP_ITERS``, ``SOLVER.DELAY_EPOCHS``)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scheduler: Mapping[str, Any],
        warmup_iters: Optional[int] = None,
        delay_epochs: Optional[int] = None,
    ) -> None:
        self._optimizer = optimizer
        self._scheduler = scheduler
        self._warmup_iters = warmup_iters
        self._delay_epochs = delay_epochs
        self._scale = 0.0
        self._log_group = self._pick_param_group(optimizer)

    @staticmethod
    def _pick_param_group(optimizer: torch.optim.Optimizer) -> int:
        """The group whose LR is shown: the largest group, or with one parameter per group the
        most common LR (i.e. not a bias or heads special case)."""
        groups = optimizer.param_groups
        largest = max(len(g["params"]) for g in groups)
        if largest == 1:
            common = Counter(g["lr"] for g in groups).most_common(1)[0][0]
            return next(i for i, g in enumerate(groups) if g["lr"] == common)
        return next(i for i, g in enumerate(groups) if len(g["params"]) == largest)

    @property
    def warmup_iters(self) -> int:
        if self._warmup_iters is not None:
            return self._warmup_iters
        return int(getattr(self.trainer, "warmup_iters", 0))

    @property
    def delay_epochs(self) -> int:
        if self._delay_epochs is not None:
            return self._delay_epochs
        return int(getattr(self.trainer, "delay_epochs", 0))

    def before_step(self) -> None:
        scaler = getattr(self.trainer, "grad_scaler", None)
        if scaler is not None:
            self._scale = scaler.get_scale()

    def after_step(self) -> None:
        lr = self._optimizer.param_groups[self._log_group]["lr"]
        self.trainer.storage.put_scalar("lr", lr, smoothing_hint=False)
        warmup = self._scheduler.get("warmup_sched")
        if warmup is not None and self.trainer.iter + 1 <= self.warmup_iters:
            scaler = getattr(self.trainer, "grad_scaler", None)
            # a step the GradScaler skipped (inf gradients) does not count as warmup
            if scaler is None or self._scale == scaler.get_scale():
                warmup.step()

    def after_epoch(self) -> None:
        iterations_done = self.trainer.iter + 1
        next_epoch = self.trainer.epoch + 1
        if iterations_done >= self.warmup_iters and next_epoch > self.delay_epochs:
            self._scheduler["lr_sched"].step()


class AutogradProfiler(HookBase):
    """Profiles the iterations for which ``enable_predicate(trainer)`` is true with
    ``torch.profiler`` and writes one Chrome trace per iteration,
    ``output_dir/profiler-trace-iter{iteration}.json`` (open it in ``chrome://tracing`` or
    Perfetto). ``use_cuda`` adds CUDA activity where CUDA is available."""

    def __init__(
        self, enable_predicate: Callable[[Any], bool], output_dir: str, *, use_cuda: bool = True
    ) -> None:
        self._enable_predicate = enable_predicate
        self._output_dir = output_dir
        self._use_cuda = use_cuda
        self._profiler: Optional[torch.profiler.profile] = None

    def before_step(self) -> None:
        if not self._enable_predicate(self.trainer):
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self._use_cuda and torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._profiler = torch.profiler.profile(activities=activities)
        self._profiler.__enter__()

    def after_step(self) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        profiler.__exit__(None, None, None)
        os.makedirs(self._output_dir, exist_ok=True)
        path = os.path.join(self._output_dir, f"profiler-trace-iter{self.trainer.iter}.json")
        profiler.export_chrome_trace(path)
        logger.info(f"Profile of iteration {self.trainer.iter} written to {path}")

    def after_train(self) -> None:
        if self._profiler is not None:  # the step raised: stop profiling
            self._profiler.__exit__(None, None, None)
            self._profiler = None


# ----------------------------------------------------------------------------------- checkpoints


class PeriodicCheckpointer(_PeriodicCheckpointer, HookBase):
    """:class:`fastreid.utils.checkpoint.PeriodicCheckpointer` as a hook: :meth:`step` runs after
    every epoch (``model_{epoch:04d}.pth`` every ``period`` epochs, ``model_final.pth`` at the end;
    ``max_epoch`` is the trainer's). A run whose last iteration ends no epoch (``SOLVER.MAX_ITER``)
    gets its final step after training.

    Beyond upstream: with ``minutes`` > 0, ``model_iter{iteration:07d}.pth`` every that many
    minutes of training (keeping the newest ``keep``); with ``save_on_stop``, one when a stop signal
    ends the run (the trainer reports its name). Each file holds the checkpointer's
    checkpointables and the ``epoch`` and ``iteration`` it was saved after.
    """

    def __init__(
        self,
        checkpointer: Any,
        period: int,
        max_epoch: Optional[int] = None,
        *,
        minutes: float = 0.0,
        keep: int = 2,
        max_to_keep: Optional[int] = None,
        save_on_stop: bool = False,
    ) -> None:
        super().__init__(checkpointer, period, max_epoch, max_to_keep=max_to_keep)
        self._seconds = float(minutes) * 60.0
        self._keep = max(1, int(keep))
        self._save_on_stop = save_on_stop
        self._timed: list[str] = []  # basenames of the iteration checkpoints written, oldest first
        self._final_saved = False
        self._last_save = time.monotonic()
        self._last_saved_iter = -1

    def state_dict(self) -> dict[str, Any]:
        return {"timed": list(self._timed)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._timed = [str(name) for name in state.get("timed", [])]

    def before_train(self) -> None:
        self.max_epoch = self.trainer.max_epoch
        self._last_save = time.monotonic()

    def _extra(self) -> dict[str, Any]:
        return {"iteration": int(self.trainer.iter)}

    def _step_after_epoch(self, epoch: int) -> bool:
        """:meth:`step` for ``epoch``; whether it saved."""
        name = self.saves_at(epoch)
        self.step(epoch, **self._extra())
        if name is not None:
            self._last_save = time.monotonic()
            self._last_saved_iter = self.trainer.iter
            self._final_saved = self._final_saved or name == self.saves_at(self.trainer.max_epoch - 1)
        return name is not None

    def _save_at_iteration(self, reason: str) -> str:
        name = f"model_iter{self.trainer.iter:07d}"
        logger.info(f"Saving a checkpoint ({reason}) after iteration {self.trainer.iter + 1}")
        self.checkpointer.save(name, epoch=int(self.trainer.epoch), **self._extra())
        self._last_save = time.monotonic()
        self._last_saved_iter = self.trainer.iter
        basename = f"{name}.pth"
        if basename in self._timed:
            self._timed.remove(basename)
        self._timed.append(basename)
        while len(self._timed) > self._keep:
            remove_checkpoint(os.path.join(self.checkpointer.save_dir, self._timed.pop(0)))
        return os.path.join(self.checkpointer.save_dir, basename)

    def _time_is_up(self) -> bool:
        return self._seconds > 0 and time.monotonic() - self._last_save >= self._seconds

    def after_step(self) -> None:
        # at the end of an epoch, wait for after_epoch: the LR schedule steps there first
        end_of_epoch = (self.trainer.iter + 1) % self.trainer.iters_per_epoch == 0
        if not end_of_epoch and self.trainer.iter < self.trainer.max_iter - 1 and self._time_is_up():
            self._save_at_iteration(f"every {self._seconds / 60:g} minutes")

    def after_epoch(self) -> None:
        saved = self._step_after_epoch(self.trainer.epoch)
        if not saved and self._time_is_up() and not getattr(self.trainer, "stopping", False):
            self._save_at_iteration(f"every {self._seconds / 60:g} minutes")

    def after_train(self) -> None:
        if self.trainer.finished:
            if not self._final_saved:
                self._step_after_epoch(self.trainer.max_epoch - 1)
        elif self._save_on_stop and getattr(self.trainer, "stopped_at", None) is not None:
            self.trainer.interrupt_checkpoint = self.save_unless_saved("stop signal")

    def save_unless_saved(self, reason: str) -> str:
        """A checkpoint of the trainer after its current iteration (``model_iter{iteration}``),
        unless the last one written is that iteration's (an epoch's just written); returns the file."""
        if self._last_saved_iter == self.trainer.iter:
            return self.checkpointer.get_checkpoint_file()
        return self._save_at_iteration(reason)


class MetricHook(HookBase):
    """Base of hooks that act on an evaluation metric (placed after the evaluation hook):
    :meth:`on_metric` gets ``(key, value, iteration)`` for each evaluation, including one run on
    resume in ``EvalHook.before_train`` (reported for ``start_iter - 1``)."""

    metric: str = "metric"

    def on_metric(self, key: str, value: float, iteration: int) -> None:
        raise NotImplementedError

    def _check(self, iteration: int) -> None:
        latest = self.trainer.storage.latest()
        key = find_metric_key(latest, self.metric)
        if key is not None and latest[key][1] == iteration:
            self.on_metric(key, float(latest[key][0]), iteration)

    def before_train(self) -> None:
        self._check(self.trainer.start_iter - 1)

    def after_epoch(self) -> None:
        self._check(self.trainer.iter)

    def after_train(self) -> None:
        if self.trainer.finished:
            self._check(self.trainer.iter)


class BestCheckpointer(MetricHook):
    """Keeps ``model_best.pth`` for the best value of an evaluation metric (higher is better),
    as detectron2's hook of the same name does. Place it after the evaluation hook.

    The best value is hook state (saved in every checkpoint) and is also written into
    ``model_best.pth``; on resume the larger of the two wins, so a resumed run never replaces the
    best model by a worse one.
    """

    def __init__(self, checkpointer: Any, metric: str = "metric", file_prefix: str = "model_best") -> None:
        self._checkpointer = checkpointer
        self.metric = metric
        self._prefix = file_prefix
        self.best = -math.inf
        self.best_iter = -1

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_iter": self.best_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = float(state["best"])
        self.best_iter = int(state["best_iter"])

    @property
    def path(self) -> str:
        return os.path.join(self._checkpointer.save_dir, f"{self._prefix}.pth")

    def _best_on_disk(self) -> tuple[float, int]:
        if not os.path.isfile(self.path):
            return -math.inf, -1
        try:
            saved = load_torch_file(self.path, description="Best model")
            return float(saved.get("best_metric", -math.inf)), int(saved.get("best_iteration", -1))
        except Exception as e:  # unreadable: the state in the checkpoint decides
            logger.warning(f"Cannot read the best metric from {self.path}: {e}")
            return -math.inf, -1

    def before_train(self) -> None:
        if self.trainer.start_iter > 0:
            value, itr = self._best_on_disk()
            if value > self.best:
                logger.info(
                    f"{self.path} holds a better {self.metric} ({value:.2f}) than the checkpoint's state"
                )
                self.best, self.best_iter = value, itr
        super().before_train()  # an evaluation the resumed checkpoint was waiting for

    def on_metric(self, key: str, value: float, itr: int) -> None:
        if itr == self.best_iter or not value > self.best:
            return
        self.best, self.best_iter = float(value), int(itr)
        logger.info(f"New best {key}: {value:.2f} at iteration {itr + 1}; saving {self.path}")
        # not tagged as last: --resume continues from the latest regular checkpoint
        self._checkpointer.save(
            self._prefix,
            tag_as_last=False,
            iteration=int(itr),
            epoch=int(itr) // self.trainer.iters_per_epoch,
            best_metric=float(value),
            best_iteration=int(itr),
        )


# ------------------------------------------------------------------------------------ evaluation


class EvalHook(HookBase):
    """Evaluates every ``eval_period`` epochs and after the last iteration (``eval_period`` <= 0:
    only at the end). Results go to the storage (same values on every rank).

    An evaluation that raises does not end training: its message is logged (the traceback goes
    to the log file), the failure is kept in :attr:`failures`, and the trainer reports it once
    training and its checkpoints are done. An evaluation skipped because a stop signal ended the
    run (or one the run was killed in) runs first thing after ``--resume``: the checkpoint it
    resumes from was written before it.
    """

    def __init__(self, eval_period: int, eval_function: Callable[[], Any]) -> None:
        self._period = eval_period
        self._func = eval_function
        self._last_eval_iter = -1
        self.failures: list[tuple[int, str]] = []

    def state_dict(self) -> dict[str, Any]:
        return {"last_eval_iter": self._last_eval_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._last_eval_iter = int(state["last_eval_iter"])

    def pending(self) -> bool:
        """Whether the iteration before ``start_iter`` was due an evaluation that did not run."""
        last = self.trainer.start_iter - 1
        return self._last_eval_iter != last and evaluation_due(self.trainer, last, self._period)

    def before_train(self) -> None:
        pending = self.trainer.start_iter - 1
        if self.pending():
            logger.info(
                f"Running the evaluation of iteration {pending + 1}, which the checkpoint was saved before"
            )
            self.trainer.storage.iter = pending
            try:
                self._do_eval()
            finally:
                self.trainer.storage.iter = self.trainer.start_iter

    def _do_eval(self) -> None:
        """Evaluate for the storage's current iteration (where the results are put)."""
        iteration = self.trainer.storage.iter
        error = ""
        results: Any = None
        model = getattr(self.trainer, "model", None)
        if isinstance(model, torch.nn.Module):
            comm.broadcast_buffers(model)  # every rank evaluates the model the checkpoint holds
        try:
            with rng_isolated():
                results = self._func()
            if results and not isinstance(results, Mapping):
                raise TypeError(f"The evaluation function must return a dict, got {type(results).__name__}")
        except Exception as e:
            error = " ".join(f"{type(e).__name__}: {e}".split())
            logger.debug("Traceback of the evaluation error:", exc_info=True)
        # every rank learns rank 0's results (plateau LR changes, best model) and any rank's error
        gathered = comm.all_gather((dict(results or {}), error))
        errors = [
            f"rank {r}: {err}" if len(gathered) > 1 else err for r, (_, err) in enumerate(gathered) if err
        ]
        self._last_eval_iter = iteration
        if errors:
            message = "; ".join(errors)
            self.failures.append((iteration, message))
            logger.error(
                f"Evaluation after iteration {iteration + 1} (epoch {iteration // self.trainer.iters_per_epoch + 1}) "
                f"failed: {message}. Training goes on; the checkpoints are saved."
            )
        elif gathered[0][0]:
            flat = {}
            for k, v in flatten_results_dict(gathered[0][0]).items():
                try:
                    flat[k] = float(v)
                except (TypeError, ValueError):
                    continue  # e.g. the data set's name
            self.trainer.storage.put_scalars(**flat, smoothing_hint=False)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        comm.synchronize()

    def after_epoch(self) -> None:
        if getattr(self.trainer, "stopping", False):
            return  # runs after --resume (see before_train)
        if evaluation_due(self.trainer, self.trainer.iter, self._period):
            self._do_eval()

    def after_train(self) -> None:
        if self.trainer.finished and self._last_eval_iter != self.trainer.iter:
            self._do_eval()


def _marked_for_precise_bn(batch: Any) -> Any:
    """A batch dict with its ``targets`` set to -1: upstream's mark of a precise-BN pass, on
    which the model uses no identity (the data set may hold more identities than the classifier)."""
    if isinstance(batch, Mapping) and isinstance(batch.get("targets"), torch.Tensor):
        return {**batch, "targets": torch.full_like(batch["targets"], -1)}
    return batch


class PreciseBN(HookBase):
    """Recomputes the BatchNorm statistics of ``model`` over ``num_iter`` batches of
    ``data_loader`` with fvcore's ``update_bn_stats`` (true averages instead of moving ones).

    As a hook it runs after the last epoch, and with ``eval_period`` > 0 also at the epochs
    evaluation runs at (before it). Batch dicts reach the model with ``targets`` -1, upstream's
    mark of a precise-BN pass. ``update_stats()`` can be called without a trainer (e.g.
    before an ``--eval-only`` test). ``data_loader_factory`` instead of ``data_loader`` builds
    the loader on first use.
    """

    def __init__(
        self,
        model: nn.Module,
        data_loader: Optional[Iterable],
        num_iter: int,
        eval_period: int = 0,
        data_loader_factory: Optional[Callable[[], Iterable]] = None,
    ) -> None:
        if data_loader is None and data_loader_factory is None:
            raise ValueError("PreciseBN needs a data_loader or a data_loader_factory")
        self._model = unwrap_model(model)
        self._data_loader = data_loader
        self._factory = data_loader_factory
        self._num_iter = num_iter
        self._period = eval_period
        self._data_iter: Optional[Any] = None
        self._last_iter = -1
        self._disabled = not get_bn_modules(self._model)
        if self._disabled:
            logger.info("PreciseBN is disabled: the model has no BatchNorm layer in training mode")

    def state_dict(self) -> dict[str, Any]:
        return {"last_iter": self._last_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._last_iter = int(state["last_iter"])

    def before_train(self) -> None:
        pending = self.trainer.start_iter - 1
        if self._last_iter != pending and evaluation_due(self.trainer, pending, self._period):
            self.update_stats(pending)  # skipped by a stop signal before the checkpoint

    def after_epoch(self) -> None:
        if not getattr(self.trainer, "stopping", False) and evaluation_due(
            self.trainer, self.trainer.iter, self._period
        ):
            self.update_stats(self.trainer.iter)

    def after_train(self) -> None:
        if self.trainer.finished and self._last_iter != self.trainer.iter:
            self.update_stats(self.trainer.iter)

    def update_stats(self, iteration: Optional[int] = None) -> None:
        """Update the model's BatchNorm statistics now (``iteration``: the training iteration
        they are for, remembered so that a resumed run does not repeat them)."""
        if self._disabled:
            return
        if iteration is not None:
            self._last_iter = iteration
        with rng_isolated():
            if self._data_iter is None:
                loader = (
                    self._data_loader if self._data_loader is not None else cast(Callable, self._factory)()
                )
                self._data_iter = iter(loader)
            data_iter = self._data_iter

            def batches():
                for i in range(1, self._num_iter + 1):
                    if i % 100 == 0:
                        logger.info(f"Running precise BN ... {i}/{self._num_iter} iterations")
                    yield _marked_for_precise_bn(next(data_iter))

            logger.info(f"Running precise BN for {self._num_iter} iterations")
            with EventStorage():  # what the model logs while running is discarded
                update_bn_stats(self._model, batches(), self._num_iter)


# -------------------------------------------------------------------------------------- training


class LayerFreeze(HookBase):
    """Keeps the named top-level modules (``MODEL.FREEZE_LAYERS``) frozen for the first
    ``freeze_iters`` iterations, through the model's own freezing
    (:mod:`fastreid.modeling.freeze`: eval mode kept across ``model.train()``), with their
    gradients dropped before the optimizer step (which works under DDP too)."""

    def __init__(self, model: nn.Module, freeze_layers: Sequence[str], freeze_iters: int) -> None:
        if not isinstance(unwrap_model(model), FrozenModulesMixin):
            raise TypeError(
                f"MODEL.FREEZE_LAYERS needs a model that supports freezing; {type(unwrap_model(model)).__name__} "
                "does not derive from fastreid.modeling.freeze.FrozenModulesMixin (Baseline does)"
            )
        self.model = model
        self.freeze_layers = list(freeze_layers)
        self.freeze_iters = freeze_iters
        self.is_frozen = False

    def before_step(self) -> None:
        if self.trainer.iter < self.freeze_iters and not self.is_frozen:
            names = freeze_modules(self.model, self.freeze_layers, stop_gradients=False)
            frozen = cast(Callable[[], list[torch.Tensor]], unwrap_model(self.model).frozen_parameters)
            self.trainer.frozen_parameters = list(frozen())
            self.is_frozen = True
            logger.info(f"Freezing {', '.join(names)} for {self.freeze_iters} iterations")
        elif self.trainer.iter >= self.freeze_iters and self.is_frozen:
            names = unfreeze_modules(self.model)
            self.trainer.frozen_parameters = []
            self.is_frozen = False
            logger.info(f"Unfreezing {', '.join(names)} at iteration {self.trainer.iter}")

    def after_train(self) -> None:
        if self.is_frozen:
            unfreeze_modules(self.model)
            self.trainer.frozen_parameters = []
            self.is_frozen = False


class SWA(HookBase):
    """Stochastic weight averaging (``torch.optim.swa_utils``): from iteration ``swa_start`` on,
    the model's parameters are averaged after every ``swa_freq`` iterations, and after the last
    iteration the model takes the averages. With ``lr_sched``, the LR then follows a cosine with
    warm restarts every ``swa_freq`` iterations, from ``swa_lr_factor`` times the LR at
    ``swa_start`` down to ``eta_min`` (upstream's hook). BatchNorm statistics are not averaged;
    precise BN (``TEST.PRECISE_BN``) recomputes them for the averaged weights."""

    def __init__(
        self, swa_start: int, swa_freq: int, swa_lr_factor: float, eta_min: float, lr_sched: bool = False
    ) -> None:
        if swa_freq < 1:
            raise ValueError(f"SWA needs swa_freq >= 1, got {swa_freq}")
        if swa_lr_factor < 0:
            raise ValueError(f"SWA needs swa_lr_factor >= 0, got {swa_lr_factor}")
        self.swa_start = int(swa_start)
        self.swa_freq = int(swa_freq)
        self.swa_lr_factor = swa_lr_factor
        self.eta_min = eta_min
        self.lr_sched = lr_sched
        self._averaged: Optional[AveragedModel] = None
        self.scheduler: Optional[CosineAnnealingWarmRestarts] = None

    def _model(self) -> nn.Module:
        return unwrap_model(cast(Any, self.trainer).model)

    def _optimizer(self) -> torch.optim.Optimizer:
        return cast(Any, self.trainer).optimizer

    def _start(self) -> None:
        self._averaged = AveragedModel(self._model(), use_buffers=False)
        optimizer = self._optimizer()
        for group in optimizer.param_groups:
            group["initial_lr"] = self.swa_lr_factor * group["lr"]
        if self.lr_sched:
            self.scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=self.swa_freq, eta_min=self.eta_min)

    def state_dict(self) -> dict[str, Any]:
        if self._averaged is None:
            return {}
        state: dict[str, Any] = {"averaged": self._averaged.state_dict()}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "averaged" not in state:
            return
        self._averaged = AveragedModel(self._model(), use_buffers=False)
        self._averaged.load_state_dict(state["averaged"])
        if self.lr_sched:
            optimizer = self._optimizer()
            self.scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=self.swa_freq, eta_min=self.eta_min)
            self.scheduler.load_state_dict(state["scheduler"])
            for group, lr in zip(optimizer.param_groups, self.scheduler.get_last_lr()):
                group["lr"] = lr  # creating the schedule reset it

    def before_step(self) -> None:
        if self.trainer.iter == self.swa_start and self._averaged is None:
            self._start()

    def after_step(self) -> None:
        if self._averaged is None:
            return
        next_iter = self.trainer.iter + 1
        if (next_iter - self.swa_start) % self.swa_freq == 0:
            self._averaged.update_parameters(self._model())
        if self.scheduler is not None:
            self.scheduler.step()
        if next_iter == self.trainer.max_iter:
            self._swap_in_averages()

    def _swap_in_averages(self) -> None:
        assert self._averaged is not None
        if int(self._averaged.n_averaged) == 0:
            logger.warning("SWA: no average was taken before the end of training; the weights are kept")
            return
        with torch.no_grad():
            for p, avg in zip(self._model().parameters(), self._averaged.module.parameters()):
                p.copy_(avg)
        logger.info(f"SWA: the model now holds the average of {int(self._averaged.n_averaged)} snapshots")


# ---------------------------------------------------------------------------------------- plateau


class PlateauHook(MetricHook):
    """Watches an evaluation metric (higher is better). After ``patience`` evaluations without
    improvement it logs a warning and, when ``factor`` < 1, multiplies every LR by ``factor``
    (never below ``min_lr``), then starts counting again.

    Place it after :class:`EvalHook`. Its state is part of the trainer's state in checkpoints.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        patience: int,
        factor: float = 1.0,
        min_lr: float = 0.0,
        metric: str = "metric",
        schedulers: Optional[Mapping[str, Any]] = None,
        threshold: float = 1e-4,
    ) -> None:
        if patience < 1:
            raise ValueError(f"SOLVER.PLATEAU.PATIENCE must be >= 1, got {patience}")
        if not 0 < factor <= 1:
            raise ValueError(f"SOLVER.PLATEAU.FACTOR must be in (0, 1], got {factor}")
        self._optimizer = optimizer
        self.patience = patience
        self.factor = factor
        self.min_lr = min_lr
        self.metric = metric
        self._schedulers = schedulers or {}
        self.threshold = threshold
        self.best = -math.inf
        self.best_iter = -1
        self.num_bad_evals = 0
        self.num_reductions = 0
        self._last_seen_iter = -1

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_iter": self.best_iter,
            "num_bad_evals": self.num_bad_evals,
            "num_reductions": self.num_reductions,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = float(state["best"])
        self.best_iter = int(state["best_iter"])
        self.num_bad_evals = int(state["num_bad_evals"])
        self.num_reductions = int(state["num_reductions"])

    def on_metric(self, key: str, value: float, itr: int) -> None:
        if itr == self._last_seen_iter:
            return  # seen already
        self._last_seen_iter = itr
        if value > self.best + self.threshold:
            self.best, self.best_iter, self.num_bad_evals = value, itr, 0
            return
        self.num_bad_evals += 1
        if self.num_bad_evals < self.patience:
            return
        self.num_bad_evals = 0
        message = (
            f"Plateau: {key} has not improved for {self.patience} evaluations "
            f"(best {self.best:.2f} at iteration {self.best_iter + 1}, now {value:.2f})"
        )
        if self.factor >= 1.0:
            logger.warning(message + "; SOLVER.PLATEAU.FACTOR < 1 would lower the LR")
            return
        self._lower_lr()
        new_lr = max(g["lr"] for g in self._optimizer.param_groups)
        logger.warning(f"{message}; LR multiplied by {self.factor} (largest LR now {new_lr:.3e})")
        self.trainer.storage.put_scalar("plateau_lr_reductions", self.num_reductions, smoothing_hint=False)

    def _lower_lr(self) -> None:
        self.num_reductions += 1
        for g in self._optimizer.param_groups:
            g["lr"] = max(g["lr"] * self.factor, self.min_lr)
        warmup = self._schedulers.get("warmup_sched")
        if warmup is not None:  # its closed form would undo the change during warmup
            warmup.base_lrs = [max(lr * self.factor, self.min_lr) for lr in warmup.base_lrs]
