"""The project's training script, shaped like upstream's FastFace ``train_net.py``."""

from fastreid.config import get_cfg
from fastreid.engine import default_setup
from fastreid.utils.checkpoint import Checkpointer

from .config import add_face_cfg
from .trainer import FaceTrainer


def setup(args):
    cfg = get_cfg()
    add_face_cfg(cfg)
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
        model = FaceTrainer.build_model(cfg)
        Checkpointer(model).load(cfg.MODEL.WEIGHTS)
        return FaceTrainer.test(cfg, model)
    trainer = FaceTrainer(cfg)
    trainer.resume_or_load(resume=args.resume)
    return trainer.train()
