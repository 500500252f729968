# tabd: `make demo` and `make test` each work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.tabd-installed

.PHONY: demo test test-fast venv editors-setup clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# torch first, pinned: the CPU build on this machine's disk; a looser spec pulls a CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tabd demo

# The test command named in the README; .ci/run calls it.
test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not editors and not browser and not llamacpp"

clean:
	rm -rf $(VENV) build *.egg-info
