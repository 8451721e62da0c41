# Everything runs from the project's own virtual environment, created on first use.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
MONTH ?= 2026-11
# settings.yaml cost_mode of the demo catalog: rate_card or full_recovery
COST_MODE ?= rate_card
# full_recovery's idle_sharing policy: weighted, even, reserved_quota_first or platform
IDLE_SHARING ?= weighted
export DAGSTER_HOME ?= $(CURDIR)/data/dagster_home

.PHONY: venv demo test test-quick ui lint bench clean

$(BIN)/activate: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/activate

venv: $(BIN)/activate

# pandas for the benchmark's baseline, on top of the dev install
$(VENV)/.bench: $(BIN)/activate
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

demo: venv
	$(BIN)/python -m simulator --month $(MONTH) --out data --cost-mode $(COST_MODE) \
	    --idle-sharing $(IDLE_SHARING)
	$(BIN)/chargeback run --month $(MONTH)

# everything, the end-to-end months and servers marked slow included
test: venv
	$(BIN)/python -m pytest

# the quick tier: everything but the slow tests, under two minutes on 2 cores
test-quick: venv
	$(BIN)/python -m pytest -m "not slow"

ui: venv
	mkdir -p $(DAGSTER_HOME) && printf 'telemetry:\n  enabled: false\n' > $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# The 1,000-GPU x 30-day month of DESIGN/issue 6; results in benchmarks/results/latest.json
bench: venv $(VENV)/.bench
	$(BIN)/python benchmarks/run.py --gpus 1000 --days 30 --interval-s 60

# ruff, then sqlfluff over sql/ (.sqlfluff holds the house rules; the suite runs it too)
lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/sqlfluff lint sql/

clean:
	rm -rf data
