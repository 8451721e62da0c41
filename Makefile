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

.PHONY: venv demo test test-quick ui workers workers-stop lint bench clean

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

# The demo's history: months before MONTH simulated with it (jobs run across the boundaries),
# so that the trends and the forecast rest on three months; all built by one run.
HISTORY_MONTHS ?= 2
FIRST_MONTH := $(shell date -u -d "$(MONTH)-01 -$(HISTORY_MONTHS) month" +%Y-%m)

demo: venv
	$(BIN)/python -m simulator --month $(MONTH) --history-months $(HISTORY_MONTHS) --out data \
	    --cost-mode $(COST_MODE) --idle-sharing $(IDLE_SHARING)
	$(BIN)/chargeback run --from $(FIRST_MONTH) --to $(MONTH)

# everything, the end-to-end months and servers marked slow included
test: venv
	$(BIN)/python -m pytest

# the quick tier: everything but the slow tests, under two minutes on 2 cores
test-quick: venv
	$(BIN)/python -m pytest -m "not slow"

ui: venv
	mkdir -p $(DAGSTER_HOME) && printf 'telemetry:\n  enabled: false\n' > $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# The daily rollups' fan-out on this machine (README "Scale-out path"): Debian's redis-server on
# 127.0.0.1:REDIS_PORT as the Celery broker, and WORKERS Celery workers taking one day at a
# time, all in the background (pids and logs in data/celery/; `make workers-stop` ends them).
# The workers read their settings (CHARGEBACK_*) from this environment when a day starts.
REDIS_PORT ?= 6379
WORKERS ?= 2
BROKER := redis://127.0.0.1:$(REDIS_PORT)/0
CELERY_RUN := $(CURDIR)/data/celery

workers: venv
	@command -v redis-server >/dev/null || { echo "redis-server: apt-get install redis-server"; exit 1; }
	mkdir -p $(CELERY_RUN)
	redis-server --bind 127.0.0.1 --port $(REDIS_PORT) --save '' --appendonly no \
	    --daemonize yes --pidfile $(CELERY_RUN)/redis.pid --logfile $(CELERY_RUN)/redis.log
	for n in $$(seq $(WORKERS)); do \
	    $(BIN)/celery -A pipelines.celery_app -b $(BROKER) --result-backend $(BROKER) \
	        --workdir $(CURDIR) worker -n w$$n@%h --concurrency 1 -Q dagster --loglevel INFO \
	        --detach --pidfile $(CELERY_RUN)/w$$n.pid --logfile $(CELERY_RUN)/w$$n.log \
	        || exit 1; \
	done
	@echo "broker $(BROKER), $(WORKERS) workers; logs in $(CELERY_RUN)"

# each worker finishes the day it is on, then stops (celery removes its pid file); Redis, which
# carries the days' results to their runs, once they are gone
workers-stop:
	for pidfile in $(CELERY_RUN)/w*.pid; do [ ! -f $$pidfile ] || kill -TERM $$(cat $$pidfile); done
	while ls $(CELERY_RUN)/w*.pid >/dev/null 2>&1; do sleep 1; done
	[ ! -f $(CELERY_RUN)/redis.pid ] || kill -TERM $$(cat $(CELERY_RUN)/redis.pid)

# The 1,000-GPU x 30-day month of DESIGN/issue 6; results in benchmarks/results/latest.json
bench: venv $(VENV)/.bench
	$(BIN)/python benchmarks/run.py --gpus 1000 --days 30 --interval-s 60

# ruff, then sqlfluff over sql/ (.sqlfluff holds the house rules; the suite runs it too)
lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/sqlfluff lint sql/

clean:
	rm -rf data
