"""The engine internals, read as gpt-fast reads: model.py (the fast forward), cache.py (the KV cache), generate.py (prefill and decode), native.py (the C one-token step)."""
