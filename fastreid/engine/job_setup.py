"""Job setup for the tools: ``default_setup(cfg, args)`` checks the config, prepares OUTPUT_DIR and
the logs, records the environment and the full config, resolves the device and seeds the run."""

from __future__ import annotations

import os
from typing import Any

from fastreid.config import CfgNode, ensure_output_dir, validate_config
from fastreid.utils import comm
from fastreid.utils.collect_env import collect_env_info
from fastreid.utils.device import resolve_device
from fastreid.utils.logger import setup_logger
from fastreid.utils.reproducibility import set_seed
from fastreid.utils.safe_load import set_checkpoint_trust

__all__ = ["default_setup", "write_config"]


def _shared_seed(seed: int) -> int:
    """A negative seed becomes a fresh one, the same on every rank."""
    if seed >= 0:
        return seed
    fresh = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
    return int(comm.all_gather(fresh)[0])


def write_config(cfg: CfgNode, output_dir: str) -> str:
    """Write the full config to ``output_dir/config.yaml`` (the folder is made if missing)."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "config.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(cfg.dump())
    return path


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
    log.info(f"Rank of current process: {rank}. World size: {comm.get_world_size()}")

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
