"""What the tests share: the fake backend (fakes), the stub OpenAI-compatible model server (stub_model), the fixture
model (fixture_model), a server in this process (inprocess), a `tabd serve` child on raw frames (rawserver), the
pytest-lsp client helpers (lspclient) and a free port (ports); predictor_cases and qwen2 for the predictor's tests."""
