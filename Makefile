# Two commands do all set-up on a fresh machine with Python 3.11+:
#   make run    - run a shipped example scenario on the default SQLite database
#   make test   - run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCENARIO ?= examples/answered-question.yaml

.PHONY: install run test lint bench clean lock

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install -qq --no-deps -e .  # -qq: without setuptools' editable-mode notice
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/orchestrator run --script $(SCENARIO)

# Bytecode is cached even where the environment turns it off (PYTHONDONTWRITEBYTECODE, as
# some container images do): each test worker, forked command and nested pytest would
# otherwise compile the package and rewrite the tests' asserts again (collection 6.3 s -> 2.6 s).
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n auto

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy orchestrator agents skills benchmarks
	$(BIN)/lint-imports --no-cache

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/workers.py
	$(BIN)/python benchmarks/latency.py
	$(BIN)/python benchmarks/client_floor.py
	$(BIN)/python benchmarks/suite.py
	$(BIN)/python benchmarks/web.py
	$(BIN)/python benchmarks/slow_bodies.py
	$(BIN)/python benchmarks/developers.py
	$(BIN)/python benchmarks/mcp_doors.py

# Regenerate requirements.lock after changing dependencies in pyproject.toml.
lock:
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra postgres --python-version 3.11 -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
