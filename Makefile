# The two commands of the README:
#   make demo   the main job (a program on a simulated fabric, checked, reported, pictured)
#   make test   the test suite (ruff + pytest, slow tests included)
# CI also runs `make test-long` (training loss curves against eager PyTorch and the
# largest training-step checks, ~20 min).
# Both create or reuse .venv and install what they need.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-long lint bench clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: the CPU build; an unpinned torch would pull a CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test,hf]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m frontend.demo --out out

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# tests run on up to 4 worker processes (pytest-xdist; 2 on a 2-core machine), which share
# one on-disk cache of compiled engines (tests/conftest.py)
test: $(STAMP) lint
	$(PY) -m pytest -q -n auto --maxprocesses=4

# the `long` tests: many training steps each, fabric against eager PyTorch
test-long: $(STAMP)
	$(PY) -m pytest -q -n auto --maxprocesses=4 -m long

bench: $(STAMP)
	$(PY) benchmarks/engine_speed.py --grid 128 --cycles 2000 --json benchmarks/results/engine_speed_128.json

clean-venv:
	rm -rf $(VENV)
