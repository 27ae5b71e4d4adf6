"""Teacher then student through the standard front door: ``tools/train_net.py`` trains
configs/Distill/demo_teacher.yml, then demo_student.yml distils from the config.yaml and
model_final.pth that run wrote, evaluating the teacher once first and logging the student's
results beside the teacher's."""

from __future__ import annotations

import pytest
import torch
from train_command import train_log  # tests/, on the path

from fastreid.cli import train

TINY = [
    "MODEL.BACKBONE.DEPTH", "18x",
    "INPUT.SIZE_TRAIN", "[64,32]",
    "INPUT.SIZE_TEST", "[64,32]",
    "SOLVER.IMS_PER_BATCH", "16",
    "DATALOADER.NUM_INSTANCE", "4",
    "SOLVER.WARMUP_ITERS", "0",
    "SOLVER.MAX_EPOCH", "1",
    "SOLVER.DELAY_EPOCHS", "0",
    "SOLVER.CHECKPOINT_PERIOD", "1",
    "TEST.EVAL_PERIOD", "1",
    "TEST.IMS_PER_BATCH", "32",
]  # fmt: skip


@pytest.mark.slow
def test_the_teacher_trains_then_the_student_distils_from_its_files(market_root, tmp_path, run_tool):
    """The three runs are the command tools/train_net.py runs (``fastreid.cli.train.run``), in this
    process."""
    teacher = tmp_path / "teacher"
    train_log(
        run_tool,
        market_root,
        "--config-file",
        "configs/Distill/demo_teacher.yml",
        *TINY,
        "OUTPUT_DIR",
        teacher,
    )
    assert (teacher / "config.yaml").is_file() and (teacher / "model_final.pth").is_file()

    student = [
        "--config-file",
        "configs/Distill/demo_student.yml",
        *TINY,
        "KD.MODEL_CONFIG",
        f"('{teacher / 'config.yaml'}',)",
    ]
    log = train_log(
        run_tool, market_root, *student,
        "KD.MODEL_WEIGHTS", f"('{teacher / 'model_final.pth'}',)",
        "OUTPUT_DIR", tmp_path / "student",
    )  # fmt: skip
    assert "DistillerOverhaul trains with fastreid.projects.distill.trainer.DistillTrainer" in log
    assert "(strict)" in log and "Evaluating teacher" in log
    assert "loss_overhaul" in log and "loss_jsdiv" in log
    table = log[log.index("Teachers and student:") :]
    assert "| Market1501" in table and "Rank-1" in table and "mAP" in table
    assert f"teacher {teacher / 'config.yaml'}" in table and "student" in table

    # a teacher checkpoint that is not the config's model: one line, before training
    wrong = tmp_path / "wrong.pth"
    torch.save({"model": {"backbone.conv1.weight": torch.zeros(1)}}, wrong)
    done = run_tool(
        train.run, *student, "KD.MODEL_WEIGHTS", f"('{wrong}',)", "OUTPUT_DIR", tmp_path / "student2",
        env={"FASTREID_DATASETS": market_root},
    )  # fmt: skip
    assert done.returncode != 0
    last = done.stderr_lines[-1]
    assert last.startswith("Config error: Teacher checkpoint") and str(wrong) in last, last
    assert "set KD.MODEL_WEIGHTS" in last and "Starting training" not in done.stdout + done.stderr
