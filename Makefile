# make run   -- a venv with herder and every driver plugin, then the example job
# make test  -- the whole test matrix (tox)
# make busybox-image -- the image of the docker examples and tests (herder-test/busybox:1), from /bin/busybox

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DISTS  := core $(wildcard plugins/*) $(wildcard integrations/*)

# tox finds every interpreter pyenv has installed, not only the selected one
# (appended to PATH, so "python3" is unchanged).
PYENV_BINS := $(shell command -v pyenv >/dev/null && ls -d "$$(pyenv root)"/versions/*/bin 2>/dev/null | paste -sd: -)
ifneq ($(PYENV_BINS),)
export PATH := $(PATH):$(PYENV_BINS)
endif

.PHONY: run test bench busybox-image clean

# tox-uv: tox's environments are made and filled by uv, in seconds rather than a minute each.
$(BIN)/herder: $(addsuffix /pyproject.toml,$(DISTS))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(addprefix -e ./,$(DISTS)) "tox>=4" "tox-uv>=1"
	touch $@

run: $(BIN)/herder
	$(BIN)/herder run --logs examples/hello.hcl

test: $(BIN)/herder
	$(BIN)/tox run-parallel --parallel-no-spinner --parallel 2

bench: $(BIN)/herder
	$(BIN)/python bench/start_overhead.py
	$(BIN)/python bench/log_throughput.py

busybox-image:
	examples/docker/build-busybox-image.sh

clean:
	rm -rf $(VENV) .tox
