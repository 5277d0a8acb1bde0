# The two set-up commands: `make start` runs OptiML Studio on this machine (SQLite, no
# Redis needed), `make test` runs every test. Both make the virtual environment first.

VENV := .venv
PYTHON := $(VENV)/bin/python
# Touched after a successful install; reinstalls when pyproject.toml changes.
INSTALLED := $(VENV)/.installed

.PHONY: start test lint frontend

$(PYTHON):
	python3 -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(PYTHON)
	$(PYTHON) -m pip install --quiet --upgrade pip
	# torch's CPU build (tests/generation runs tiny models on the CPU): from a local
	# wheel where the machine has one, else from PyTorch's CPU index.
	$(PYTHON) -m pip install --quiet 'torch==2.13.0+cpu' 2>/dev/null \
	  || $(PYTHON) -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $@

# The browser bundle (frontend/dist/, served as static files): npm ci when the lockfile
# changes, then a vite build.
FRONTEND_DEPS := frontend/node_modules/.installed

$(FRONTEND_DEPS): frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

frontend: $(FRONTEND_DEPS)
	cd frontend && npm run build

# `lineage bootstrap` fills an empty default skill library from the recordings committed
# under bench/results (lineages, probes, the roundtrip's admission); once it holds cards
# it only says so.
start: $(INSTALLED) frontend
	$(PYTHON) manage.py migrate --noinput
	$(PYTHON) manage.py sync_tasks
	$(PYTHON) manage.py lineage bootstrap
	PYTHON=$(PYTHON) scripts/serve

test: $(INSTALLED) frontend
	cd frontend && npm test
	$(PYTHON) -m pytest tests

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
