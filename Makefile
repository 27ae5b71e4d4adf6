# Two commands on a fresh Linux machine:  make demo  and  make test
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# torch/torchvision known to work together; override e.g. TORCH_SPEC="torch torchvision"
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
DATA_ROOT ?= datasets
DEMO_OUT ?= logs/demo

.PHONY: demo test test-fast lint venv dev clean-venv data bench wheel

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

data: venv
	$(PY) -m fastreid.data.datasets.synthetic --root $(DATA_ROOT)

demo: venv
	FASTREID_DATASETS=$(DATA_ROOT) $(PY) tools/demo.py --root $(DATA_ROOT) --output $(DEMO_OUT)

bench: venv
	$(PY) benchmarks/dataloader.py
	$(PY) benchmarks/evaluation.py

# The wheel (configs included as fastreid.configs, console scripts fastreid-train ...) in dist/.
wheel: venv
	$(PIP) wheel --no-deps -w dist .

clean-venv:
	rm -rf $(VENV)
