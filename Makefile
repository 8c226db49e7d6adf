# The two commands a newcomer needs: `make demo` and `make test`. `make help` lists the rest.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
PYTEST := $(PY) -m pytest

.PHONY: help
help: ## list every target
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed (found %s): install it and retry." % sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $@

.PHONY: venv
venv: $(STAMP) ## create the virtualenv and install the pinned dependencies

.PHONY: fetch
fetch: venv ## download the Kafka broker and the Spark Kafka connector jars, build the job's jar (cached in .cache/)
	$(PY) -m deploy fetch

.PHONY: up up-secure down status wipe settings
up: venv ## start the embedded local stack: Kafka (KRaft) and Redis on 127.0.0.1, topics created
	$(PY) -m deploy up
up-secure: venv ## the same with a SASL_SSL broker (SCRAM users, CA generated; see deploy/README.md)
	$(PY) -m deploy up --secure
down: ## stop the local stack
	@test -x $(PY) && $(PY) -m deploy down || true
status: venv ## show what is running
	$(PY) -m deploy status
wipe: ## stop the local stack and delete its data (keeps downloads)
	$(PY) -m deploy wipe
settings: venv ## list every setting and its environment variable
	$(PY) -m deploy settings

.PHONY: test test-unit test-integration test-slow e2e
test: fetch ## the whole test suite (starts the local stack itself; installs Debian's chromium for the browser checks when root)
	$(PY) -m deploy browser
	$(PYTEST) tests
test-unit: venv ## unit tests only: no services, seconds
	$(PYTEST) -m unit tests
test-integration: fetch ## integration tests against the real broker, Redis and Spark
	$(PYTEST) -m integration tests
test-slow: fetch ## minutes-long runs left out of make test (detector recall on 60,000 transactions; the built-in Kafka sink's crash comparison; 30 SIGKILLs of the case manager)
	FRAUD_SLOW_TESTS=1 $(PYTEST) -m slow tests
e2e: fetch ## end-to-end tests against the local stack (tests/e2e, FRAUD_E2E_TARGET=local)
	FRAUD_E2E_TARGET=local $(PYTEST) -m e2e tests
.PHONY: chaos
chaos: fetch ## the full chaos suite: 205,000 transactions at 250/s while every component fails in turn -> artifacts/chaos/full/ (RATE=1000: paced at 1,000/s -> full-1000/; PLAN=flood: a kill inside the flood of broken records)
	FRAUD_E2E_TARGET=local FRAUD_CHAOS_PLAN=$(or $(PLAN),full) $(if $(RATE),FRAUD_CHAOS_RATE=$(RATE)) $(PYTEST) -s tests/e2e/test_chaos.py

# --- the local cluster (docs/cluster.md) -------------------------------------------------------
.PHONY: cluster-up cluster-down e2e-cluster
cluster-up: fetch ## 3 KRaft brokers (replication 3, min ISR 2), a Spark standalone master + 2 workers, Redis; 127.0.0.1 only
	$(PY) -m deploy cluster-up
cluster-down: ## stop the local cluster
	@test -x $(PY) && $(PY) -m deploy cluster-down || true
e2e-cluster: fetch ## the cluster suite (tests/cluster): chaos on the cluster (a broker, a Spark worker, an enricher SIGKILLed), the pipeline benchmark there next to local[2]; starts and tears down the cluster
	FRAUD_CLUSTER_TESTS=1 $(PYTEST) -s tests/cluster

.PHONY: demo
demo: fetch ## the whole diamond on the local stack (see README)
	$(PY) -m demo $(if $(DURATION),--duration $(DURATION)) $(if $(RATE),--rate $(RATE)) $(if $(KEEP),--keep-running) $(if $(DETECTORS),--detectors $(DETECTORS))

.PHONY: clean
clean: down ## remove the venv, downloads and run-time data
	rm -rf $(VENV) .cache .run .pytest_cache .hypothesis

# --- producers --------------------------------------------------------------------------------
.PHONY: simulate replay load-reference
simulate: up ## simulated transactions to Kafka (OUT=dir for files; SEED, COUNT, RATE)
	$(PY) -m producers simulate --seed $(or $(SEED),1) --count $(or $(COUNT),100000) $(if $(OUT),--out $(OUT)) $(if $(RATE),--rate $(RATE))
replay: up ## publish a JSONL file: FILE=... (RAW=1 publishes broken lines as they are, SPEEDUP=x)
	$(PY) -m producers replay $(FILE) $(if $(RAW),--raw) $(if $(SPEEDUP),--speedup $(SPEEDUP))
load-reference: up ## customer, card and merchant profiles into Redis
	$(PY) -m producers load-reference --seed $(or $(SEED),1)

# --- detectors --------------------------------------------------------------------------------
.PHONY: detectors list-detectors new-detector
detectors: up ## run every detector query on the local stack (NAMES="double_swipe velocity" for some)
	$(PY) -m detectors run $(NAMES)
list-detectors: venv ## list the registered detectors and their parameters
	$(PY) -m detectors list
new-detector: venv ## start a new detector from the template: NAME=my_detector
	@test -n "$(NAME)" || { echo "usage: make new-detector NAME=my_detector"; exit 2; }
	$(PY) -m detectors.new_detector $(NAME)

# --- models -----------------------------------------------------------------------------------
.PHONY: train
train: venv ## train and compare models on simulated data, register the best, write artifacts/models/report.md
	$(PY) -m models train $(if $(PROFILE),--profile $(PROFILE)) $(if $(SEED),--seed $(SEED))

# --- downstream services ----------------------------------------------------------------------
.PHONY: enricher cases dashboard
enricher: up ## the Faust enricher: alerts -> alerts.enriched
	$(PY) -m sinks.enricher worker -l info
cases: up ## the Faust case manager: alerts.enriched -> cases (+ Redis)
	$(PY) -m sinks.cases worker -l info
dashboard: up ## the live dashboard on http://127.0.0.1:8765/
	$(PY) -m sinks.dashboard

# --- benchmarks -------------------------------------------------------------------------------
.PHONY: bench bench-quick bench-producer
bench: up ## every benchmark, side by side with the baselines -> artifacts/bench/<run>/ (ONLY="pipeline latency")
	$(PY) -m bench $(if $(ONLY),--only $(ONLY))
bench-quick: up ## the short form of make bench
	$(PY) -m bench --quick $(if $(ONLY),--only $(ONLY))
bench-producer: up ## simulator vs raw kafka-python producer throughput -> artifacts/bench/
	$(PY) -m bench.producer_throughput

# --- docker compose ----------------------------------------------------------------------------
# Every target starts the engine when none runs (root; one line saying why not otherwise) and builds
# the compose plugin when the CLI has none. COMPOSE_IMAGES=official|local|auto (auto: the official
# images when they are here or a registry answers, else images built here from Debian; docs/deployment.md).
.PHONY: docker-engine compose-images compose-up compose-down e2e-compose e2e-compose-cluster
COMPOSE := deploy/docker/compose.sh
# Host ports of the compose stack for host-side clients (the compose file's defaults).
COMPOSE_HOST_ENV = FRAUD_KAFKA_BOOTSTRAP=127.0.0.1:$${KAFKA_HOST_PORT:-29092} \
	FRAUD_REDIS_URL=redis://127.0.0.1:$${REDIS_HOST_PORT:-26379}/0 \
	FRAUD_DASHBOARD_HOST=127.0.0.1 FRAUD_DASHBOARD_PORT=$${DASHBOARD_HOST_PORT:-18765} \
	FRAUD_PROMETHEUS_PORT=$${PROMETHEUS_HOST_PORT:-19090}
# The `cluster` profile's: its three brokers' published ports, and its Redis.
COMPOSE_CLUSTER_HOST_ENV = FRAUD_KAFKA_BOOTSTRAP=127.0.0.1:$${KAFKA_1_HOST_PORT:-29192},127.0.0.1:$${KAFKA_2_HOST_PORT:-29193},127.0.0.1:$${KAFKA_3_HOST_PORT:-29194} \
	FRAUD_REDIS_URL=redis://127.0.0.1:$${REDIS_HOST_PORT:-26379}/0 FRAUD_REPLICATION_FACTOR=3
COMPOSE_CLUSTER_SERVICES := redis kafka-1 kafka-2 kafka-3 cluster-topics spark-master spark-worker-1 spark-worker-2 detectors-cluster
docker-engine: ## start dockerd when no Docker engine answers (root); `make compose-down` stops only one started here
	@deploy/docker/engine.sh start
compose-images: docker-engine ## build the compose stack's images (first run on Debian-built images: ~15 min, then cached)
	@deploy/docker/compose-plugin.sh
	@if [ "$$($(COMPOSE) which-images)" = local ]; then echo "no image registry: building the images from Debian (deploy/docker/local-images.sh)"; deploy/docker/local-images.sh; fi
	COMPOSE_PARALLEL_LIMIT=1 nice -n 10 $(COMPOSE) build   # one at a time: the dashboard reuses the app image's layers
compose-up: compose-images ## the whole diamond in containers: Kafka, Redis, topics, a model, services; returns when healthy
	$(COMPOSE) up -d --wait --wait-timeout 900
compose-down: ## stop the compose stack (every profile), delete its volumes, stop a dockerd that make docker-engine started
	@if deploy/docker/engine.sh status | grep -q 'engine: running'; then $(COMPOSE) --profile '*' down -v --remove-orphans; fi
	@deploy/docker/engine.sh stop
e2e-compose: venv ## the end-to-end suite against the compose stack and its Prometheus (`monitoring` profile): builds, starts, tests, tears down (also on failure)
	@trap '$(MAKE) --no-print-directory compose-down' EXIT; export COMPOSE_PROFILES=monitoring; \
	$(MAKE) --no-print-directory compose-up || { $(COMPOSE) logs --no-color --tail 40; exit 1; }; \
	FRAUD_E2E_TARGET=compose $(COMPOSE_HOST_ENV) $(PYTEST) -m e2e tests
e2e-compose-cluster: venv ## the compose `cluster` profile: builds, starts, a labelled stream while a broker is SIGKILLed, exactly-once count, tears down (not in make test; docs/cluster.md)
	@trap '$(MAKE) --no-print-directory compose-down' EXIT; export COMPOSE_PROFILES=cluster; \
	$(MAKE) --no-print-directory compose-images && \
	{ $(COMPOSE) up -d --wait --wait-timeout 900 $(COMPOSE_CLUSTER_SERVICES) || { $(COMPOSE) logs --no-color --tail 40; exit 1; }; } && \
	FRAUD_E2E_TARGET=compose-cluster FRAUD_CLUSTER_TESTS=1 $(COMPOSE_CLUSTER_HOST_ENV) $(PYTEST) -s tests/cluster/test_compose_cluster.py
