"""Every command line in README.md and docs/*.md runs in the suite, or this file says why not.

Each fenced block names its language (``text`` for output and layouts); the commands of the shell
blocks (bash, sh, console, bat ...) are collected, continuation lines joined, ``&&`` chains split.
Each command is then, by the rules below (the one place that decides):

- run as written, in this process (the console script's function from pyproject.toml, the tool's
  file or the module run as ``__main__``), in a scratch folder that holds the documented
  ``datasets/`` (the synthetic sets, which the documented generator commands make there) and
  ``logs/``: so ``logs/demo/config.yaml`` is what ``make demo`` wrote. Only small-making overrides
  are added (``TINY``: a ResNet-18 at small sizes, one training iteration; ``--small`` data sets),
  and the placeholders of ``PLACEHOLDERS`` get a real file;
- run with ``--help`` (``HELP``: a server or a search of many trainings);
- or not run, with the reason (``NOT_RUN``: a download, an install, a GPU, Windows, a cluster, a
  second machine), naming the test that runs its equivalent where one does.

A command no rule knows fails, so a new command in the docs is covered or listed here. ``make X``
runs the commands ``make -n X`` prints (the recipe, without make creating a virtual environment).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import logging
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console", "bat", "cmd", "powershell"}
MAKE = shutil.which("make")

# --------------------------------------------------------------------------- the rules (one place)

# Commands not run here, and why; where a test runs the same thing, it is named (and must exist).
NOT_RUN: list[tuple[str, str, Optional[str]]] = [
    (r"^git clone ", "downloads this repository", None),
    (r"^cd ", "changes the folder the next commands run in (here: a scratch folder)", None),
    (r"(^|\\|/)pip install ", "installs packages from PyPI (network)", None),
    (r"^python -m venv ", "creates a virtual environment (the suite runs in one)", None),
    (r"^train_windows_recommended\.bat ", "cmd.exe (Windows)",
     "tests/engine/test_reliability_tool.py::test_each_way_of_starting_a_run_prints_the_command_that_resumes_it"),
    (r"^make test$", "the suite itself", None),
    (r"^wget ", "downloads an upstream checkpoint (network)", None),
    (r"market_agw_R50\.pth", "needs the upstream checkpoint the wget above downloads", None),
    (r"^trtexec ", "TensorRT on an NVIDIA GPU", None),
    (r"^(ovc|benchmark_app) ", "OpenVINO's tools (pip install openvino: network)", None),
    (r"^curl ", "a request to the fastreid-serve started above",
     "tests/serve/test_serve_app.py::test_k_from_the_form_the_query_or_the_default"),
    (r"^ray start ", "starts a node of a Ray cluster (several machines)", None),
    (r"^fastreid-tune .*--address ", "runs on a Ray cluster (several machines)", None),
    (r"--nnodes 2 ", "two machines", "tests/engine/test_torchrun.py::test_a_lost_node_restarts_both_nodes_which_resume"),
    (r"^srun ", "SLURM (a cluster)", None),
    (r"^(trap|wait|PID=|code=|OUT=|HEAD=|if |fi$|exit |grep |scontrol )", "the shell plumbing of a SLURM batch script",
     None),
    (r"--num-gpus 2", "spawns two training processes",
     "tests/engine/test_training_end_to_end.py::test_two_process_gloo_ddp_trains_and_evaluates"),
    (r"^torchrun --nproc.per.node 2 tools/train_net\.py", "two training processes under torchrun",
     "tests/engine/test_torchrun.py::test_a_lost_node_restarts_both_nodes_which_resume"),
    (r"^torchrun --nproc_per_node 2 -m fastreid\.cli\.train", "two training processes under torchrun",
     "tests/face/test_partial_fc_ddp.py::test_two_processes_train_as_one_and_checkpoints_are_interchangeable"),
    (r"--num-processes 4", "four extraction processes",
     "tests/inference/test_extract_cli.py::test_several_processes_name_a_failure_resume_and_write_the_same_bytes_as_one"),
    (r"^make gpu-check", "the CUDA checks need an NVIDIA GPU; the CPU-only mode (reference run, each CUDA check SKIP)"
     " is run by the named test",
     "tests/tools/test_gpu_check.py::test_without_cuda_the_reference_runs_and_every_cuda_check_is_skipped"),
    (r"^make wheels ", "downloads wheels from PyPI (network); the install from such a folder is the named test",
     "tests/tools/test_gpu_check.py::test_offline_install_takes_only_what_the_python_lacks"),
    (r"configs/UDA/cc_(duke|market)_R50\.yml", "a full-size ResNet-50 Cluster Contrast run (DukeMTMC-reID, ImageNet"
     " weights: downloads); the same family trained tiny from random weights is the named test",
     "tests/uda/test_training.py::test_the_run_logs_and_reports_each_epochs_pseudo_labels"),
    (r"configs/UDA/cc_folder\.yml", "a folder of the user's own camera crops; a folder target trains in the named test",
     "tests/uda/test_target.py::test_a_folder_target_trains"),
    (r"--index-type ivfpq --nlist 3162", "an IVF-PQ index sized for ~1M gallery vectors",
     "tests/inference/test_search_ivfpq.py::test_saved_index_reopens_with_its_features_for_rerank"),
    (r"--index gallery\.faiss", "reopens the 1M-vector index of the command above",
     "tests/inference/test_search_ivfpq.py::test_saved_index_reopens_with_its_features_for_rerank"),
]  # fmt: skip

# Commands this file does not run because a named test runs the same thing: the demos whose
# config the family's own tests train (tools/demo.py's family path runs here for make demo-attr
# and make demo-clas; each target's recipe is checked by
# tests/tools/test_demo_runs.py::test_every_demo_target_runs_tools_demo_with_its_family), and the
# ONNX exports (~7 and ~10 s here: the export, its check with onnxruntime, the int8 calibration
# and evaluation) with the extraction through the int8 model.
RUN_ELSEWHERE: list[tuple[str, str]] = [
    (r"^make demo-face$", "tests/face/test_face_training.py::test_tools_train_net_trains_with_partial_fc_and_evaluates_then_its_weights_evaluate_the_same"),
    (r"^make demo-partial$", "tests/partial/test_partial_training.py::test_train_net_trains_on_market_and_evaluates_the_partial_sets"),
    (r"^make demo-retri$", "tests/retri/test_retri_training.py::test_fastreid_train_trains_the_demo_and_reports_recall_above_chance"),
    (r"^make demo-uda", "tests/uda/test_demo.py::test_the_demo_trains_the_three_models_and_prints_their_table"),
    (r"^make demo-distill$", "tests/distill/test_distill_training.py::test_the_teacher_trains_then_the_student_distils_from_its_files"),
    (r"--format onnx --dynamic-batch --output", "tests/inference/test_export.py::test_export_tool_onnx_on_images"),
    (r"--quantize int8", "tests/inference/test_quantize.py::test_export_tool_writes_int8_and_prints_metrics_beside_fp32"),
    (r"--backend onnxruntime", "tests/inference/test_backends.py::test_extract_tool_onnxruntime_backend_equals_torch_backend"),
]  # fmt: skip

# Commands run with --help only: a server that runs until stopped, a search of many trainings.
HELP = [
    (r"^fastreid-serve ", "serves until Ctrl-C", "tests/serve/test_serve_cli.py::test_the_command_serves_until_ctrl_c"),
    (r"^fastreid-tune ", "a search trains many models",
     "tests/tune/test_tune.py::test_an_interrupted_search_resumes_and_finds_the_better_learning_rate"),
]  # fmt: skip

# Files the docs name as examples, made real: the upstream checkpoint to evaluate, two run folders
# to compare, a folder of gallery images.
PLACEHOLDERS = {
    "model_final.pth": "logs/market1501/bagtricks_R50/model_final.pth",
    "logs/exp1": "logs/demo",
    "logs/exp2": "logs/market",
    "gallery_images": "datasets/Market-1501-v15.09.15/bounding_box_test",
}

# One training iteration: it ends no epoch, so the final evaluation and checkpoints (model_final.pth,
# model_best.pth) are the trainer's after-training ones; the per-epoch ones run in the families'
# training tests.
_ONE_ITER = ["SOLVER.MAX_EPOCH", "1", "SOLVER.MAX_ITER", "1", "SOLVER.WARMUP_ITERS", "0"]
_COMMON = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.AMP.ENABLED", "False",
           "CUDNN_BENCHMARK", "False", "TEST.REPORT", "False", *_ONE_ITER]  # fmt: skip
# re-ID: 32x16 images (a 2x1 map with LAST_STRIDE 1), a batch of two identities of NUM_INSTANCE 4
_REID = ["MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.FEAT_DIM", "512", "MODEL.BACKBONE.PRETRAIN", "False",
         "MODEL.BACKBONE.WITH_IBN", "False", "MODEL.BACKBONE.WITH_NL", "False",
         "INPUT.SIZE_TRAIN", "[32,16]", "INPUT.SIZE_TEST", "[32,16]", "SOLVER.IMS_PER_BATCH", "8",
         "TEST.IMS_PER_BATCH", "64"]  # fmt: skip
# The overrides that make each documented config small (after _COMMON: a run of one iteration).
TINY = {
    "configs/Market1501/bagtricks_R50.yml": _REID,
    "configs/Attr/pa100.yml": ["MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.FEAT_DIM", "512",
                               "MODEL.BACKBONE.PRETRAIN", "False", "INPUT.SIZE_TRAIN", "[32,16]",
                               "INPUT.SIZE_TEST", "[32,16]", "SOLVER.IMS_PER_BATCH", "16",
                               "TEST.IMS_PER_BATCH", "16"],
    "configs/Clas/base-clas.yml": ["MODEL.BACKBONE.PRETRAIN", "False", "INPUT.CROP.SIZE", "[32]",
                                   "INPUT.SIZE_TEST", "[40]", "SOLVER.IMS_PER_BATCH", "8", "TEST.IMS_PER_BATCH",
                                   "8"],
    # the demo's IResNet-18 on 16x16 faces (512 x 1 x 1 features), the data's identities (not Glint360k's)
    "configs/Face/r50_ir.yml": ["MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.FEAT_DIM", "512",
                                "MODEL.HEADS.NUM_CLASSES", "0", "MODEL.HEADS.EMBEDDING_DIM", "128",
                                "MODEL.PRECISION", "fp32", "INPUT.SIZE_TRAIN", "[16,16]",
                                "INPUT.SIZE_TEST", "[16,16]", "SOLVER.IMS_PER_BATCH", "16",
                                "TEST.IMS_PER_BATCH", "40", "DATASETS.TESTS", "('LFW',)"],
    # 128x128: DSRHead's 8x8 window needs an 8x8 map (LAST_STRIDE 1)
    "configs/PartialReID/partial_market.yml": ["MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.FEAT_DIM", "512",
                                               "MODEL.BACKBONE.PRETRAIN", "False", "INPUT.SIZE_TRAIN",
                                               "[128,128]", "INPUT.SIZE_TEST", "[128,128]",
                                               "SOLVER.IMS_PER_BATCH", "8", "TEST.IMS_PER_BATCH", "32",
                                               "DATASETS.TESTS", "('OccludedREID',)"],
    "configs/Retri/cub.yml": ["MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.FEAT_DIM", "512",
                              "MODEL.BACKBONE.PRETRAIN", "False", "INPUT.SIZE_TRAIN", "[32,32]",
                              "INPUT.SIZE_TEST", "[32,32]", "INPUT.CROP.SIZE", "[32,32]", "SOLVER.IMS_PER_BATCH", "16",
                              "TEST.IMS_PER_BATCH", "64"],
    # the teacher on the synthetic Market-1501 (the config's DukeMTMC-reID has no synthetic set), a
    # batch of 16 (Base-SBS.yml's NUM_INSTANCE)
    "configs/Distill/sbs_r101ibn.yml": [*_REID, "SOLVER.IMS_PER_BATCH", "16", "DATASETS.NAMES", "('Market1501',)",
                                        "DATASETS.TESTS", "('Market1501',)", "SOLVER.CHECKPOINT_PERIOD", "1",
                                        "TEST.EVAL_PERIOD", "1"],
    "configs/Distill/kd-sbs_r101ibn-sbs_r34.yml": [*_REID, "SOLVER.IMS_PER_BATCH", "16",
                                                   "DATASETS.NAMES", "('Market1501',)",
                                                   "DATASETS.TESTS", "('Market1501',)"],
}  # fmt: skip
# make's demo targets, each with overrides of its config (DEMO_OPTS)
_EPOCH = [*_ONE_ITER, "TEST.REPORT", "False"]
TINY_DEMOS = {
    "demo": ["--num-pictures", "1", "INPUT.SIZE_TRAIN", "[32,16]", "INPUT.SIZE_TEST", "[32,16]",
             "SOLVER.IMS_PER_BATCH", "8", "TEST.IMS_PER_BATCH", "64", *_EPOCH],
    "demo-attr": ["INPUT.SIZE_TRAIN", "[32,16]", "INPUT.SIZE_TEST", "[32,16]", "SOLVER.IMS_PER_BATCH", "16",
                  "TEST.IMS_PER_BATCH", "16", *_EPOCH],
    "demo-clas": ["INPUT.CROP.SIZE", "[32]", "INPUT.SIZE_TEST", "[40]", "SOLVER.IMS_PER_BATCH", "8",
                  "TEST.IMS_PER_BATCH", "8", *_EPOCH],
    "demo-face": ["SOLVER.IMS_PER_BATCH", "16", "TEST.IMS_PER_BATCH", "40", "DATASETS.TESTS", "('LFW',)", *_EPOCH],
    "demo-partial": ["INPUT.SIZE_TRAIN", "[128,128]", "INPUT.SIZE_TEST", "[128,128]", "SOLVER.IMS_PER_BATCH", "16",
                     "TEST.IMS_PER_BATCH", "32", *_EPOCH],
    "demo-retri": ["INPUT.SIZE_TRAIN", "[32,32]", "INPUT.SIZE_TEST", "[32,32]", "SOLVER.IMS_PER_BATCH", "16",
                   "TEST.IMS_PER_BATCH", "64", *_EPOCH],
    "demo-distill": ["INPUT.SIZE_TRAIN", "[64,32]", "INPUT.SIZE_TEST", "[64,32]", "SOLVER.IMS_PER_BATCH", "16",
                     "TEST.IMS_PER_BATCH", "32", *_EPOCH],
}  # fmt: skip

# ------------------------------------------------------------------------------- the doc commands


@dataclass
class Command:
    doc: str
    line: int
    language: str
    text: str
    words: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def fenced_blocks(path: Path) -> list[tuple[str, int, str]]:
    """(info string, line of the first line inside, text) of each fenced block."""
    blocks, inside, lines = [], None, path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```(.*)$", line)
        if fence and inside is None:
            inside = (fence.group(1).strip(), number + 1, [])
        elif fence:
            blocks.append((inside[0], inside[1], "\n".join(inside[2])))
            inside = None
        elif inside is not None:
            inside[2].append(line)
    return blocks


def _strip_comment(line: str, language: str) -> str:
    if language in ("bat", "cmd"):
        return "" if re.match(r"^\s*(REM\b|::)", line, re.I) else line
    words, quote, out = line, None, []
    for i, ch in enumerate(words):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or words[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).rstrip()


def block_commands(language: str, text: str) -> list[tuple[int, str]]:
    """(offset of the first line, command) of each command of a shell block."""
    commands, current, start = [], "", 0
    continuation = "^" if language in ("bat", "cmd") else "\\"
    for offset, raw in enumerate(text.split("\n")):
        line = raw
        if language == "console":
            if not line.startswith("$ ") and not current:
                continue
            line = line[2:] if line.startswith("$ ") else line
        line = _strip_comment(line, language)
        if not current:
            start = offset
        if line.endswith(continuation):
            current += line[:-1].strip() + " "
            continue
        current = (current + line.strip()).strip()
        if current:
            for part in current.split(" && "):
                commands.append((start, part.strip()))
        current = ""
    return commands


def doc_commands() -> list[Command]:
    found = []
    for path in DOCS:
        for language, line, text in fenced_blocks(path):
            if (language.split() or [""])[0] not in SHELLS:
                continue
            for offset, command in block_commands(language, text):
                found.append(Command(str(path.relative_to(REPO)), line + offset, language, command))
    return found


COMMANDS = doc_commands()


def rule_of(command: Command) -> tuple[str, str, Optional[str]]:
    """("not run" | "help" | "run", reason, the test that runs it elsewhere)."""
    if command.language in ("bat", "cmd", "powershell"):
        match = next(((r, w) for p, r, w in NOT_RUN if re.search(p, command.text)), None)
        return ("not run", *(match or ("cmd.exe (Windows)", None)))
    for pattern, reason, where in NOT_RUN:
        if re.search(pattern, command.text):
            return "not run", reason, where
    for pattern, where in RUN_ELSEWHERE:
        if re.search(pattern, command.text):
            return "not run", "runs in another test", where
    for pattern, reason, where in HELP:
        if re.search(pattern, command.text):
            return "help", reason, where
    return "run", "", None


# ------------------------------------------------------------------------------- the runner


def _console_scripts() -> dict[str, str]:
    with open(REPO / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"]["scripts"])


SCRIPTS = _console_scripts()


def _program(words: list[str]) -> tuple[str, str, list[str]]:
    """("script" | "file" | "module" | "make", target, arguments) of a command; KeyError when it is
    no program of this project."""
    if words[0] in SCRIPTS:
        return "script", words[0], words[1:]
    if words[0] in ("python", "python3") and len(words) > 2 and words[1] == "-m":
        return "module", words[2], words[3:]
    if words[0] in ("python", "python3") and len(words) > 1 and words[1].endswith(".py"):
        return "file", words[1], words[2:]
    if words[0] == "make":
        return "make", words[1], words[2:]
    raise KeyError(words[0])


def _stage(command: Command) -> int:
    """Run order: data sets, then demos, then trainings, then what reads their folders."""
    kind, target, args = _program(command.words)
    if kind == "module" and target.startswith("fastreid.data.synthetic"):
        return 0
    if kind == "make":
        return 1
    trains = (kind, target) in (("script", "fastreid-train"), ("file", "tools/train_net.py"))
    if trains and "--eval-only" not in args and "--resume" not in args:
        return 2
    return 3


def _tiny(kind: str, target: str, args: list[str]) -> list[str]:
    if kind == "module" and target.startswith("fastreid.data.synthetic"):
        return [*args, "--small"]
    if "--quantize" in args:  # calibration on the small set's 64 training images, not 256
        return ["--calib-images", "32", *args]
    if "--config-file" in args and (kind, target) in (
        ("script", "fastreid-train"),
        ("file", "tools/train_net.py"),
    ):
        config = args[args.index("--config-file") + 1]
        if config not in TINY:
            raise KeyError(f"no TINY overrides for {config}")
        return [*args, *_COMMON, *TINY[config]]
    return args


def _call(kind: str, target: str, args: list[str]) -> int:
    """Run one program in this process as its command line would; its exit code."""
    argv0 = target if kind != "module" else "-m"
    old_argv, sys.argv = sys.argv, [argv0, *args]
    try:
        if kind == "script":
            module, _, function = SCRIPTS[target].partition(":")
            return int(getattr(__import__(module, fromlist=[function]), function)() or 0)
        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(REPO / target), run_name="__main__")
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old_argv


def _make_recipe(target: str, variables: list[str]) -> list[list[str]]:
    """The commands ``make -n target`` prints, as argument lists (the Makefile's own interpreter
    replaced by this one), with their leading ``NAME=value`` assignments kept as ``env`` words."""
    dry = subprocess.run([MAKE, "-n", "-o", "venv", target, "PY=python", *variables], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return [shlex.split(line) for line in dry.stdout.splitlines() if line.strip()]


def _close_file_logs() -> None:
    for logger in [x for x in logging.root.manager.loggerDict.values() if isinstance(x, logging.Logger)]:
        for handler in [h for h in logger.handlers if isinstance(h, logging.FileHandler)]:
            if getattr(handler, "_fastreid_setup_logger", False):
                logger.removeHandler(handler)
                handler.close()


def run_command(command: Command, workdir: Path) -> int:
    kind, target, args = _program(command.words)
    if kind == "make":
        opts = shlex.join(TINY_DEMOS[target])
        for words in _make_recipe(target, [f"DEMO_OPTS={opts}", *args]):
            env = {}
            while words and re.match(r"^[A-Z_]+=", words[0]):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            if env.get("FASTREID_DATASETS"):
                os.environ["FASTREID_DATASETS"] = str(workdir / env["FASTREID_DATASETS"])
            code = run_words(words, workdir)
            if code:
                return code
        return 0
    return run_words(command.words, workdir)


def run_words(words: list[str], workdir: Path) -> int:
    kind, target, args = _program(words)
    return _call(kind, target, _tiny(kind, target, args))


@pytest.fixture(scope="module")
def results(workdir, one_torch_thread) -> dict[str, object]:
    """Every command run (in stage order, each once), in one scratch folder: its exit code, or
    the error it raised; the help commands with --help."""
    (workdir / "datasets").mkdir()
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    os.chdir(workdir)
    os.environ["FASTREID_DATASETS"] = str(workdir / "datasets")
    outcome: dict[str, object] = {}
    seen: dict[str, str] = {}
    runnable = [c for c in COMMANDS if rule_of(c)[0] != "not run"]
    for c in runnable:
        c.words = shlex.split(c.text.rstrip("&").strip())
    try:
        for c in sorted(runnable, key=_stage):
            key = shlex.join(c.words)  # the same command backgrounded (``&``) runs once
            if key in seen:
                outcome[c.where] = outcome[seen[key]]
                continue
            seen[key] = c.where
            if _stage(c) == 3:
                for name, real in PLACEHOLDERS.items():
                    if not os.path.lexists(name) and os.path.exists(real):
                        os.symlink(os.path.abspath(real), name)
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    if rule_of(c)[0] == "help":
                        kind, target, _ = _program(c.words)
                        code = _call(kind, target, ["--help"])
                    else:
                        code = run_command(c, workdir)
                outcome[c.where] = code if code == 0 else f"exit {code}: {err.getvalue()[-2000:]}"
            except Exception as e:  # reported by the command's own test
                outcome[c.where] = f"{type(e).__name__}: {e}"
            finally:
                _close_file_logs()
                os.environ.clear()
                os.environ.update(old_env)
                os.environ["FASTREID_DATASETS"] = str(workdir / "datasets")
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return outcome


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The scratch folder the commands run in."""
    return tmp_path_factory.mktemp("docs")


# ------------------------------------------------------------------------------- the tests


def test_every_fenced_block_names_its_language():
    untagged = [
        f"{p.relative_to(REPO)}:{line - 1}" for p in DOCS for lang, line, _ in fenced_blocks(p) if not lang
    ]
    assert untagged == [], "tag each block: bash (commands) or text (output, layouts)"


def test_the_rules_match_documented_commands_and_name_real_tests():
    texts = [c.text for c in COMMANDS]
    for pattern, _, where in NOT_RUN + HELP + [(p, "", w) for p, w in RUN_ELSEWHERE]:
        assert any(re.search(pattern, t) for t in texts), f"no documented command matches {pattern!r}"
        if where:
            path, _, name = where.partition("::")
            tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
            assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, where


def test_every_command_is_known():
    unknown = []
    for c in COMMANDS:
        if rule_of(c)[0] == "not run":
            continue
        try:
            kind, target, args = _program(shlex.split(c.text.rstrip("&").strip()))
            _tiny(kind, target, args)
            if kind == "make":
                assert target in TINY_DEMOS, target
        except (KeyError, AssertionError, ValueError) as e:
            unknown.append(f"{c.where}: {c.text} ({e})")
    assert unknown == [], "run it, or list it in NOT_RUN / HELP with the reason"


@pytest.mark.slow  # ~45 s of CPU, all in one fixture: ~37 tiny runs (one-iteration trainings, evaluations, reports)
@pytest.mark.skipif(MAKE is None, reason="make is not installed")
@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if rule_of(c)[0] != "not run"], ids=lambda c: c.where
)
def test_documented_command_runs(command, results):
    assert results[command.where] == 0, f"{command.text}: {results[command.where]}"


@pytest.mark.slow
@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_a_demo_without_its_report_names_the_command_that_writes_it(results, workdir, monkeypatch):
    """The demos ran with TEST.REPORT False: the line they end with names the command that writes
    the report; run as printed (in the folder they ran in), it does."""
    assert results["docs/classification.md:133"] == 0
    spec = importlib.util.spec_from_file_location("fastreid_tools_demo", REPO / "tools" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = demo
    spec.loader.exec_module(demo)
    monkeypatch.chdir(workdir)
    line = demo.report_line("logs/demo_clas")
    assert line.startswith("Report: not written") and not (workdir / "logs/demo_clas/report.html").exists()
    words = shlex.split(line.split("write it with: ", 1)[1])
    assert _call(*_program(words)) == 0
    assert (workdir / "logs/demo_clas/report.html").is_file()
