# The two commands of a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# The PostgreSQL that `make test` runs the PostgreSQL full-text tests against.
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/test

.PHONY: run test lint typecheck bench install clean

$(BIN)/activate: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(BIN)/activate

install: $(BIN)/activate

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_catalogue
	$(BIN)/python manage.py load_demo
	$(BIN)/python manage.py recover_runs
	@echo ""
	@echo "  Open http://$(HOST):$(PORT)/  and sign in as demo / demo-password"
	@echo "  Web tools: the demo web (fictional pages shipped with the project, read offline) unless DEMO_WEB=0"
	@echo "  Code: run_code where its sandbox can run on this machine, unless RUN_CODE_ENABLED=0"
	@echo ""
	# The demo web on here only: web_search and web_fetch read the pages the project ships, not the internet.
	# run_code on for the demo (offered only where every layer of its sandbox is there: engine/sandbox.py).
	DEMO_WEB=$${DEMO_WEB:-1} RUN_CODE_ENABLED=$${RUN_CODE_ENABLED:-1} $(BIN)/python manage.py runserver --noreload $(HOST):$(PORT)

test: install
	$(BIN)/ruff check .
	$(BIN)/mypy assistant tests
	# The apps' layers, no cycle between siblings, the engine free of Django (pyproject.toml), then no module cycle.
	$(BIN)/lint-imports
	$(BIN)/python tools/check_cycles.py
	# Steps are read as events: only the steps module reads their raw JSON.
	$(BIN)/python tools/check_step_data.py
	DATABASE_URL= $(BIN)/python -m pytest -m "not postgres" --ignore=tests/e2e
	# The browser tests run in their own process: Playwright's sync API keeps an event loop running.
	DATABASE_URL= $(BIN)/python -m pytest tests/e2e
	DATABASE_URL=$(PG_TEST_URL) $(BIN)/python -m pytest -m postgres --ignore=tests/e2e --ignore=tests/scale tests
	# Scaled out: its own test database, Redis keys and real Celery worker processes (tests/scale/conftest.py).
	DATABASE_URL=$(PG_TEST_URL) $(BIN)/python -m pytest -m postgres tests/scale

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python tools/check_cycles.py

typecheck: install
	$(BIN)/mypy assistant tests

# The peer of the whole-server benchmark (bench/peer.py) in a virtualenv of its own: openai-agents 0.24 needs
# websockets<17, the project pins 17.4.
PEER_VENV := .venv-peer
$(PEER_VENV)/bin/activate: bench/peer-requirements.txt
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install --quiet --upgrade pip
	$(PEER_VENV)/bin/pip install --quiet -r bench/peer-requirements.txt
	touch $(PEER_VENV)/bin/activate

bench: install $(PEER_VENV)/bin/activate
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(PEER_VENV) .pytest_cache .mypy_cache .ruff_cache
