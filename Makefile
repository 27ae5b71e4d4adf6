# Two commands on a fresh Linux machine:  make demo  and  make test
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# torch/torchvision known to work together; override e.g. TORCH_SPEC="torch torchvision"
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
DATA_ROOT ?= datasets
DEMO_OUT ?= logs/demo
DEMO_ATTR_OUT ?= logs/demo_attr
DEMO_PARTIAL_OUT ?= logs/demo_partial
DEMO_DISTILL_OUT ?= logs/demo_distill
DEMO_FACE_OUT ?= logs/demo_face
DEMO_RETRI_OUT ?= logs/demo_retri
DEMO_CLAS_OUT ?= logs/demo_clas
DEMO_UDA_OUT ?= logs/demo_uda
DEMO_SEED ?= 42

.PHONY: demo demo-attr demo-clas demo-distill demo-face demo-partial demo-retri demo-uda test test-fast test-portable lint venv dev clean-venv data bench wheel

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Stamps make re-runs fast: installs run again only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet $(TORCH_SPEC)
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install --quiet -e ".[dev]"
	touch $@

venv: $(VENV)/.installed
dev: $(VENV)/.installed-dev

lint: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy fastreid

# pytest exits 5 when it collects no test; that is a failure here too.
# Two pytest-xdist workers, one test file each at a time (module fixtures are built once): most
# tests wait on subprocesses that import torch, so the suite takes ~60 % of the serial time on
# 2 cores. TEST_JOBS=0 runs it serially.
TEST_JOBS ?= 2
test: dev lint
	$(PY) -m pytest -q $(if $(filter-out 0,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)

# The quick loop while editing: everything but the tests marked slow (under a minute).
test-fast: dev
	$(PY) -m pytest -q -m "not slow" $(if $(filter-out 0,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)

# The suite as another CPU runs it (x86-64): PyTorch's, oneDNN's and MKL's kernels forced down to
# what an older or different CPU has, one setting after the other. A test that passes here only
# with this CPU's own kernels (float32 rounding, a random draw that differs by instruction set)
# fails under one of them. ~3x make test's time; PORTABLE_PYTEST_ARGS narrows it, e.g. to a folder.
PORTABLE_KERNELS ?= \
	"ATEN_CPU_CAPABILITY=default" \
	"ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 MKL_CBWR=COMPATIBLE" \
	"ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 MKL_CBWR=COMPATIBLE"
PORTABLE_PYTEST_ARGS ?=
test-portable: dev
	@set -e; for kernels in $(PORTABLE_KERNELS); do \
		echo "== make test-portable: $$kernels"; \
		env $$kernels $(PY) -m pytest -q $(if $(filter-out 0,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile) $(PORTABLE_PYTEST_ARGS); \
	done

data: venv
	$(PY) -m fastreid.data.synthetic --root $(DATA_ROOT)

demo: venv
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/demo.py --root $(DATA_ROOT) --output $(DEMO_OUT)

# Pedestrian attributes (docs/attributes.md): the synthetic PA-100K (kept when it exists), then
# configs/Attr/pa100_demo.yml trained and evaluated on the CPU, in a new run folder each time.
demo-attr: venv
	@test -f $(DATA_ROOT)/PA-100K/annotation.mat || $(PY) -m fastreid.data.synthetic.attributes --root $(DATA_ROOT)
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/Attr/pa100_demo.yml \
		OUTPUT_DIR $(DEMO_ATTR_OUT)/$$(date +%Y%m%d-%H%M%S)

# Partial re-ID (docs/partial.md): the synthetic Market-1501 and partial sets (each kept when it
# exists), then configs/PartialReID/partial_market_demo.yml trained and evaluated on the CPU.
demo-partial: venv
	@test -d $(DATA_ROOT)/Market-1501-v15.09.15 || $(PY) -m fastreid.data.synthetic --root $(DATA_ROOT)
	@test -d $(DATA_ROOT)/OccludedREID || $(PY) -m fastreid.data.synthetic.partial --root $(DATA_ROOT)
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/PartialReID/partial_market_demo.yml \
		OUTPUT_DIR $(DEMO_PARTIAL_OUT)/$$(date +%Y%m%d-%H%M%S)

# Distillation (docs/distillation.md): the synthetic Market-1501 (kept when it exists), the teacher
# (configs/Distill/demo_teacher.yml), then the student distilled from the teacher's config.yaml and
# model_final.pth (configs/Distill/demo_student.yml), both in one new run folder.
demo-distill: venv
	@test -d $(DATA_ROOT)/Market-1501-v15.09.15 || $(PY) -m fastreid.data.synthetic --root $(DATA_ROOT)
	@out=$(DEMO_DISTILL_OUT)/$$(date +%Y%m%d-%H%M%S); set -e; \
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/Distill/demo_teacher.yml \
		OUTPUT_DIR $$out/teacher; \
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/Distill/demo_student.yml \
		KD.MODEL_CONFIG "('$$out/teacher/config.yaml',)" KD.MODEL_WEIGHTS "('$$out/teacher/model_final.pth',)" \
		OUTPUT_DIR $$out/student

# Image retrieval (docs/retrieval.md): the synthetic CUB-200-2011 (kept when it exists), then
# configs/Retri/cub_demo.yml trained and evaluated (Recall@K, mAP@R) on the CPU, a new run folder each time.
demo-retri: venv
	@test -f $(DATA_ROOT)/CUB_200_2011/train.txt || $(PY) -m fastreid.data.synthetic.retrieval --root $(DATA_ROOT)
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/Retri/cub_demo.yml \
		OUTPUT_DIR $(DEMO_RETRI_OUT)/$$(date +%Y%m%d-%H%M%S)

# Face recognition (docs/face.md): the synthetic faces (kept when they exist), then
# configs/Face/face_demo.yml (IResNet-18, Partial FC) trained and evaluated on LFW / CFP-FP / AgeDB-30 pairs.
demo-face: venv
	@test -f $(DATA_ROOT)/faces_emore_val/lfw/pairs.txt || $(PY) -m fastreid.data.synthetic.faces --root $(DATA_ROOT)
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/Face/face_demo.yml \
		OUTPUT_DIR $(DEMO_FACE_OUT)/$$(date +%Y%m%d-%H%M%S)

# Image classification (docs/classification.md): the synthetic Hymenoptera (kept when it exists),
# then configs/Clas/base-clas_demo.yml trained and evaluated on the CPU, in a new run folder each time.
demo-clas: venv
	@test -d $(DATA_ROOT)/hymenoptera_data/train || $(PY) -m fastreid.data.synthetic.classes --root $(DATA_ROOT)
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/train_net.py --config-file configs/Clas/base-clas_demo.yml \
		OUTPUT_DIR $(DEMO_CLAS_OUT)/$$(date +%Y%m%d-%H%M%S)

# Domain adaptation (docs/uda.md): the synthetic domains A (Market-1501) and B (DukeMTMC-reID;
# each kept when it exists), a source model on A, Cluster Contrast on B's unlabelled images and a
# model on B's labels, all evaluated on B and printed side by side ("direct transfer", "adapted",
# "supervised"). DEMO_SEED=1 make demo-uda trains with another seed.
demo-uda: venv
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/demo_uda.py --root $(DATA_ROOT) --seed $(DEMO_SEED) \
		--output $(DEMO_UDA_OUT)/$$(date +%Y%m%d-%H%M%S)

bench: venv
	$(PY) benchmarks/dataloader.py
	$(PY) benchmarks/evaluation.py

# The wheel (configs included as fastreid.configs, console scripts fastreid-train ...) in dist/.
wheel: venv
	$(PIP) wheel --no-deps -w dist .

clean-venv:
	rm -rf $(VENV)
