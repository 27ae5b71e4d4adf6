"""The project's training script, as upstream's FastAttr ``train_net.py`` is shaped: a Trainer
subclass, ``setup`` (project keys, then the file, then the command line) and ``main``."""

from fastreid.config import get_cfg
from fastreid.data.build import build_reid_test_loader, build_reid_train_loader, datasets_root
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.transforms import build_transforms
from fastreid.engine import DefaultTrainer, default_setup
from fastreid.utils import comm
from fastreid.utils.checkpoint import Checkpointer

from .attr_dataset import AttrDataset
from .config import add_attr_config
from .evaluation import AttrEvaluator


class AttrTrainer(DefaultTrainer):
    sample_weights = None

    @classmethod
    def build_model(cls, cfg):
        model = DefaultTrainer.build_model(cfg)
        if cfg.MODEL.LOSSES.BCE.WEIGHT_ENABLED and AttrTrainer.sample_weights is not None:
            model.sample_weights = AttrTrainer.sample_weights.to(model.device)
        return model

    @classmethod
    def build_train_loader(cls, cfg):
        items, attr_dict = [], None
        for name in cfg.DATASETS.NAMES:
            dataset = DATASET_REGISTRY.get(name)(root=datasets_root(), combineall=cfg.DATASETS.COMBINEALL)
            if comm.is_main_process():
                dataset.show_train()
            assert attr_dict is None or attr_dict == dataset.attr_dict
            attr_dict = dataset.attr_dict
            items.extend(dataset.train)
        train_set = AttrDataset(items, build_transforms(cfg, is_train=True), attr_dict)
        data_loader = build_reid_train_loader(cfg, train_set=train_set)
        AttrTrainer.sample_weights = data_loader.dataset.sample_weights
        return data_loader

    @classmethod
    def build_test_loader(cls, cfg, dataset_name):
        dataset = DATASET_REGISTRY.get(dataset_name)(root=datasets_root())
        if comm.is_main_process():
            dataset.show_test()
        test_set = AttrDataset(dataset.test, build_transforms(cfg, is_train=False), dataset.attr_dict)
        data_loader, _ = build_reid_test_loader(cfg, test_set=test_set)
        return data_loader

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_folder=None):
        return cls.build_test_loader(cfg, dataset_name), AttrEvaluator(cfg, output_folder)


def setup(args):
    cfg = get_cfg()
    add_attr_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.freeze()
    default_setup(cfg, args)
    return cfg


def main(args):
    cfg = setup(args)
    if args.eval_only:
        cfg.defrost()
        cfg.MODEL.BACKBONE.PRETRAIN = False
        model = AttrTrainer.build_model(cfg)
        Checkpointer(model).load(cfg.MODEL.WEIGHTS)
        return AttrTrainer.test(cfg, model)
    trainer = AttrTrainer(cfg)
    trainer.resume_or_load(resume=args.resume)
    return trainer.train()
