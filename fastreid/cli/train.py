"""Train or evaluate a re-ID model from a config file (upstream FastReID's command line).

    fastreid-train --config-file configs/Market1501/bagtricks_R50.yml
    fastreid-train --config-file configs/Market1501/bagtricks_R50.yml --resume
    fastreid-train --config-file configs/Market1501/bagtricks_R50.yml --eval-only \
        MODEL.WEIGHTS logs/market1501/bagtricks_R50/model_final.pth
    fastreid-train --config-file ... --num-gpus 2        # DDP (gloo processes on a CPU)
    torchrun --nproc_per_node 2 -m fastreid.cli.train --config-file ... --dist-url env://

``python tools/train_net.py`` (a checkout) runs the same code. ``--config-file`` names a file
relative to the working directory, or one of the configs shipped with the package
(:mod:`fastreid.config.locate`). Nothing heavy is imported at module level: :func:`run` decides
the OpenMP settings before anything imports torch, and spawned processes (Windows, macOS, DDP,
spawn data workers) can import this module without starting a second training.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import sys
from typing import Any

from fastreid.config import ConfigError, get_cfg, validate_config
from fastreid.config.locate import resolve_config_file
from fastreid.utils.env import setup_environment
from fastreid.utils.errors import run_tool
from fastreid.utils.resume_hint import resume_command
from fastreid.utils.threads import configure_openmp

__all__ = ["load_config", "main", "run", "setup"]


def setup(args: argparse.Namespace) -> Any:
    """The config from the file and the overrides, then the job setup (logger, seed, saved config)."""
    from fastreid.engine import default_setup  # imports torch: after the OpenMP decision in run()

    cfg = load_config(args)
    default_setup(cfg, args)
    cfg.freeze()
    return cfg


def load_config(args: argparse.Namespace) -> Any:
    """Merge ``--config-file`` and the trailing ``KEY VALUE`` overrides (raises ConfigError)."""
    cfg = get_cfg()
    if not args.config_file:
        raise ConfigError(
            "--config-file is required, e.g. --config-file configs/Market1501/bagtricks_R50.yml"
        )
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts or [])
    if getattr(args, "trust_checkpoint", False):
        cfg.MODEL.TRUST_CHECKPOINT = True
    validate_config(cfg, world_size=max(1, args.num_gpus) * max(1, args.num_machines))
    return cfg


def main(args: argparse.Namespace) -> Any:
    """One process's job: train (or resume), or evaluate ``MODEL.WEIGHTS`` with ``--eval-only``.

    The trainer is :class:`~fastreid.engine.DefaultTrainer`, or the one a task family registered
    for the config's meta architecture (:func:`fastreid.engine.trainers.trainer_for`: e.g.
    ``AttrBaseline`` trains with ``fastreid.projects.attr.AttrTrainer``)."""
    # the engine and the checkpointer import torch: after the OpenMP decision in run()
    from fastreid.engine import default_setup
    from fastreid.engine.defaults import num_classes_in_checkpoint  # torch, as above
    from fastreid.engine.hooks import write_run_report  # torch, as above
    from fastreid.engine.run_dir import claim_output_dir  # torch, as above
    from fastreid.engine.trainers import trainer_for  # torch, as above
    from fastreid.utils.checkpoint import Checkpointer  # torch, as above

    cfg = load_config(args)
    Trainer = trainer_for(cfg)
    # One run per OUTPUT_DIR (lock file); a new training run does not write over an old one.
    lock = claim_output_dir(
        cfg.OUTPUT_DIR, resume=args.resume, break_lock=args.break_lock, check_existing=not args.eval_only
    )
    try:
        default_setup(cfg, args)
        cfg.freeze()
        if Trainer.__name__ != "DefaultTrainer":
            logging.getLogger("fastreid").info(
                f"{cfg.MODEL.META_ARCHITECTURE} trains with {Trainer.__module__}.{Trainer.__name__}"
            )
        if args.eval_only:
            if not cfg.MODEL.WEIGHTS:
                raise ConfigError(
                    "--eval-only needs the weights to evaluate: add MODEL.WEIGHTS path/to/model_final.pth"
                )
            cfg.defrost()
            cfg.MODEL.BACKBONE.PRETRAIN = False
            if cfg.MODEL.HEADS.NUM_CLASSES == 0:
                cfg.MODEL.HEADS.NUM_CLASSES = num_classes_in_checkpoint(cfg.MODEL.WEIGHTS) or 1
            cfg.freeze()
            model = Trainer.build_model(cfg)
            Checkpointer(model, strict_load=cfg.MODEL.WEIGHTS_STRICT).load(cfg.MODEL.WEIGHTS)
            results = Trainer.test(cfg, model)
            if cfg.TEST.REPORT:
                write_run_report(cfg.OUTPUT_DIR)  # main process only; a failure is a warning
            return results

        trainer = Trainer(cfg)
        trainer.resume_or_load(resume=args.resume)
        return trainer.train()
    finally:
        if lock is not None:
            lock.release()


def run(argv: list[str] | None = None) -> int:
    """Parse the command line, set up the environment, check the config, launch ``main``.

    The entry point of ``fastreid-train`` and ``tools/train_net.py``; returns the exit code.
    """
    configure_openmp()  # before anything imports torch: OpenMP reads its wait policy when loaded
    from fastreid.engine import default_argument_parser, launch  # imports torch: after the OpenMP decision

    args = default_argument_parser().parse_args(argv)
    # Resolved once here: the DDP processes get the path that was found, and default_setup logs it.
    args.config_file = resolve_config_file(args.config_file)
    setup_environment(cuda_launch_blocking=args.cuda_launch_blocking)

    def _launch() -> None:
        from fastreid.engine import TrainingInterruptedError  # torch: after the OpenMP decision

        load_config(args)  # fail fast, in this process, before any worker is spawned
        try:
            launch(
                main,
                args.num_gpus,
                num_machines=args.num_machines,
                machine_rank=args.machine_rank,
                dist_url=args.dist_url,
                args=(args,),
                timeout=datetime.timedelta(minutes=args.dist_timeout),
            )
        except KeyboardInterrupt:
            # a second Ctrl-C: stopped at once; the last checkpoint written is intact
            raise TrainingInterruptedError(
                f"Interrupted; resume with: {resume_command()}", exit_code=130
            ) from None

    # A user error (config, data, weights, sample, NaN loss) prints one line and exits 1 (2 for
    # config, 3 for a failed evaluation after training); its traceback goes to OUTPUT_DIR/log.txt.
    # A stop signal saves a checkpoint and exits 128 + the signal number (130 for Ctrl-C).
    return run_tool(_launch)


if __name__ == "__main__":
    sys.exit(run())
