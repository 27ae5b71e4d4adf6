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

# Python caches compiled modules (__pycache__/, ignored by git) even where the shell says not to:
# the suite starts ~90 Python processes, each would compile the package's ~190 modules again
# (~0.3 s of CPU each), and each test worker would rewrite every test module's asserts again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo demo-attr demo-clas demo-distill demo-face demo-partial demo-retri demo-uda test test-fast test-portable coverage lint venv dev clean-venv data bench wheel wheels gpu-check

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
# pytest-xdist workers: one more than the CPUs (the package's count, with the affinity mask and a
# cgroup quota), as tests wait on the processes, servers and clusters they start (2 cores: 3 workers
# ran the suite in 746 s, 2 in 899 s). One test file per worker at a time (module fixtures are
# built once), the heaviest files first (tests/durations.json, see tests/conftest.py); the 25
# slowest tests are listed at the end. TEST_JOBS=0 runs it serially; PYTEST_ARGS adds options (e.g.
# a folder, or --junitxml=logs/junit.xml for tools/dev/suite_durations.py).
TEST_JOBS ?= $(shell $(PY) -c "from fastreid.utils.threads import available_cpus; print(available_cpus() + 1)")
PYTEST_ARGS ?=
# --no-loadscope-reorder: keep that order (pytest-xdist otherwise hands out the files with the most
# tests first, which ran the tune search in the middle and the Ray Serve replicas last).
XDIST = $(if $(filter-out 0,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder)
# make test is make lint and the suite; mypy (~35 s of one core without its cache, as in a fresh
# clone) runs beside the tests rather than before them, its report printed after theirs. Either
# failing fails make test.
test: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@mkdir -p logs; echo "$(VENV)/bin/mypy fastreid  (beside the tests: logs/mypy.log)"; \
	$(VENV)/bin/mypy fastreid > logs/mypy.log 2>&1 & typing=$$!; \
	echo "$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)"; \
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS); tests=$$?; \
	wait $$typing; typed=$$?; echo "== $(VENV)/bin/mypy fastreid"; cat logs/mypy.log; \
	test $$tests -eq 0 && test $$typed -eq 0

# Line coverage of fastreid/ by the suite (in the test processes; the tools' own subprocesses are
# not counted): the table, and logs/coverage.json.
coverage: dev
	$(PY) -m pytest -q $(XDIST) --cov=fastreid --cov-report=term --cov-report=json:logs/coverage.json $(PYTEST_ARGS)

# The quick loop while editing: everything but the tests marked slow (under a minute).
test-fast: dev
	$(PY) -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

# The suite as other CPUs run it (x86-64): PyTorch's (ATen), oneDNN's and MKL's kernels forced down
# together to what a real older CPU has, one CPU after the other: an AVX2 one without AVX-512 (most
# laptops, AMD Zen 1-3) and an SSE4 one without AVX (ATen's scalar "default" kernels). Each library
# runs at each of those levels, and make test runs this CPU's own. A test that passes only with
# this CPU's kernels (float32 rounding, a random draw that differs by instruction set) fails under
# one of them. ~2.3x make test's time (the SSE4 pass is the slower: oneDNN's convolutions without
# AVX). PORTABLE_PYTEST_ARGS narrows it, e.g. to a folder; PORTABLE_KERNELS replaces the list, e.g.
# with "ATEN_CPU_CAPABILITY=default" (ATen's scalar kernels beside this CPU's oneDNN and MKL).
PORTABLE_KERNELS ?= \
	"ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 MKL_CBWR=COMPATIBLE" \
	"ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 MKL_CBWR=COMPATIBLE"
PORTABLE_PYTEST_ARGS ?=
test-portable: dev
	@set -e; for kernels in $(PORTABLE_KERNELS); do \
		echo "== make test-portable: $$kernels"; \
		env $$kernels $(PY) -m pytest -q $(XDIST) $(PORTABLE_PYTEST_ARGS); \
	done

data: venv
	$(PY) -m fastreid.data.synthetic --root $(DATA_ROOT)

# Every demo runs through tools/demo.py: the family's synthetic data (kept when it exists), then its
# config(s) trained and evaluated on the CPU. The first run goes to the folder named below, each
# later one beside it (<folder>-YYYYmmdd-HHMMSS); the same target run again resumes an interrupted
# run (stopped by a signal, killed or cut by a power loss) instead, and a line says which.
# DEMO_OPTS: config overrides (KEY VALUE ...) for every run of the target.
DEMO_OPTS ?=
run_demo = FASTREID_DATASETS=$(DATA_ROOT) FASTREID_MAKE_GOAL=$@ $(PY) tools/demo.py --family $(1) \
	--root $(DATA_ROOT) --output $(2) $(DEMO_OPTS)

# Re-ID (README.md): the synthetic Market-1501, configs/Demo/bagtricks_demo.yml, the untrained and
# trained model evaluated, rank lists drawn.
demo: venv
	$(call run_demo,reid,$(DEMO_OUT))

# Pedestrian attributes (docs/attributes.md): the synthetic PA-100K, configs/Attr/pa100_demo.yml.
demo-attr: venv
	$(call run_demo,attr,$(DEMO_ATTR_OUT))

# Partial re-ID (docs/partial.md): the synthetic Market-1501 and partial sets,
# configs/PartialReID/partial_market_demo.yml.
demo-partial: venv
	$(call run_demo,partial,$(DEMO_PARTIAL_OUT))

# Distillation (docs/distillation.md): the synthetic Market-1501, the teacher
# (configs/Distill/demo_teacher.yml), then the student distilled from the teacher's config.yaml and
# model_final.pth (configs/Distill/demo_student.yml), in the run folder's teacher/ and student/.
demo-distill: venv
	$(call run_demo,distill,$(DEMO_DISTILL_OUT))

# Image retrieval (docs/retrieval.md): the synthetic CUB-200-2011, configs/Retri/cub_demo.yml
# (Recall@K, mAP@R).
demo-retri: venv
	$(call run_demo,retri,$(DEMO_RETRI_OUT))

# Face recognition (docs/face.md): the synthetic faces, configs/Face/face_demo.yml (IResNet-18,
# Partial FC) evaluated on LFW / CFP-FP / AgeDB-30 pairs.
demo-face: venv
	$(call run_demo,face,$(DEMO_FACE_OUT))

# Image classification (docs/classification.md): the synthetic Hymenoptera, configs/Clas/base-clas_demo.yml.
demo-clas: venv
	$(call run_demo,clas,$(DEMO_CLAS_OUT))

# Domain adaptation (docs/uda.md): the synthetic domains A (Market-1501) and B (DukeMTMC-reID;
# each kept when it exists), a source model on A, Cluster Contrast on B's unlabelled images and a
# model on B's labels, all evaluated on B and printed side by side ("direct transfer", "adapted",
# "supervised"). make demo-uda DEMO_OPTS="SEED 1" trains with another seed.
demo-uda: venv
	$(call run_demo,uda,$(DEMO_UDA_OUT))

bench: venv
	$(PY) benchmarks/dataloader.py
	$(PY) benchmarks/evaluation.py

# Every CUDA path on one CUDA GPU, offline (docs/gpu.md): a table of PASS / FAIL / SKIP and
# $(GPU_CHECK_OUT)/gpu_check.json. It runs with the PyTorch already installed (this checkout's .venv
# when there is one, else $(PYTHON)); WHEELS=folder first installs, with no network, what that
# Python lacks from a folder `make wheels` filled. CPU_REF=gpu_check.json takes the CPU reference
# from an earlier run (e.g. `make gpu-check` on a CPU machine) instead of training it here;
# UPSTREAM=checkout times upstream FastReID's own trainer beside ours. Without CUDA: the CPU
# reference runs, every CUDA check is SKIP, exit 0.
GPU_CHECK_OUT ?= logs/gpu_check
GPU_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	@set -e; site=""; \
	if [ -n "$(WHEELS)" ]; then \
		site="$(abspath $(GPU_CHECK_OUT))/site"; \
		$(GPU_PY) tools/dev/offline_wheels.py install --wheels "$(WHEELS)" --target "$$site"; \
	fi; \
	PYTHONPATH="$(CURDIR)$${site:+:$$site}$${PYTHONPATH:+:$$PYTHONPATH}" $(GPU_PY) tools/dev/gpu_check.py \
		--out $(GPU_CHECK_OUT) $(if $(CPU_REF),--cpu-reference $(CPU_REF)) $(if $(UPSTREAM),--upstream $(UPSTREAM)) \
		$(GPU_CHECK_ARGS)

# The wheels `make gpu-check WHEELS=...` installs on a machine with no network: everything the
# package and its serve and deploy extras need beyond PyTorch/torchvision, for the target's Python
# (WHEELS_PYTHON, e.g. 3.12) on x86-64 Linux. Run where PyPI is reachable.
WHEELS_DIR ?= wheels
WHEELS_PYTHON ?= $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
wheels: venv
	$(PY) tools/dev/offline_wheels.py download --dest $(WHEELS_DIR) --python-version $(WHEELS_PYTHON) --extras serve,deploy

# The wheel (configs included as fastreid.configs, console scripts fastreid-train ...) in dist/.
wheel: venv
	$(PIP) wheel --no-deps -w dist .

clean-venv:
	rm -rf $(VENV)
