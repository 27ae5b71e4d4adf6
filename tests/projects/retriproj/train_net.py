"""The project's training script, shaped like upstream's FastRetri and PartialReID
``train_net.py``: a Trainer with its own evaluator and test, ``setup`` and ``main`` (whose
``--eval-only`` recomputes precise BN statistics first, as PartialReID's does)."""

import json
import logging
import os

from fastreid.config import get_cfg
from fastreid.engine import DefaultTrainer, default_setup, hooks
from fastreid.engine.defaults import DefaultTrainer as UpstreamPathTrainer
from fastreid.utils import comm
from fastreid.utils.checkpoint import Checkpointer

from .config import add_retri_config
from .retri_evaluator import RetriEvaluator

assert UpstreamPathTrainer is DefaultTrainer


class Trainer(DefaultTrainer):
    tested = 0  # how many times test() ran: evaluation goes through the override
    optimizers_built = 0

    @classmethod
    def build_optimizer(cls, cfg, model):
        optimizer, param_wrapper = super().build_optimizer(cfg, model)  # upstream's pair
        cls.optimizers_built += 1
        return optimizer, param_wrapper

    @staticmethod
    def auto_scale_hyperparams(cfg, num_classes):
        cfg = DefaultTrainer.auto_scale_hyperparams(cfg, num_classes)
        if comm.is_main_process() and cfg.OUTPUT_DIR:
            with open(os.path.join(cfg.OUTPUT_DIR, "identities.json"), "w") as f:
                json.dump({"num_classes": num_classes}, f)
        return cfg

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_dir=None):
        data_loader, num_query = cls.build_test_loader(cfg, dataset_name)
        return data_loader, RetriEvaluator(cfg, num_query, output_dir)

    @classmethod
    def test(cls, cfg, model):
        cls.tested += 1
        results = super().test(cfg, model)
        results["Recall@mean"] = sum(results[f"Recall@{k}"] for k in cfg.TEST.RECALLS) / len(cfg.TEST.RECALLS)
        return results


def setup(args):
    cfg = get_cfg()
    add_retri_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.freeze()
    default_setup(cfg, args)
    return cfg


def main(args):
    cfg = setup(args)
    if args.eval_only:
        logger = logging.getLogger("fastreid.trainer")
        cfg.defrost()
        cfg.MODEL.BACKBONE.PRETRAIN = False
        model = Trainer.build_model(cfg)
        Checkpointer(model).load(cfg.MODEL.WEIGHTS)
        if cfg.TEST.PRECISE_BN.ENABLED and hooks.get_bn_modules(model):
            prebn_cfg = cfg.clone()
            prebn_cfg.DATALOADER.NUM_WORKERS = 0
            prebn_cfg.DATASETS.NAMES = (cfg.TEST.PRECISE_BN.DATASET,)
            logger.info("Prepare precise BN dataset")
            hooks.PreciseBN(
                model, Trainer.build_train_loader(prebn_cfg), cfg.TEST.PRECISE_BN.NUM_ITER
            ).update_stats()
        return Trainer.test(cfg, model)
    trainer = Trainer(cfg)
    trainer.resume_or_load(resume=args.resume)
    return trainer.train()
