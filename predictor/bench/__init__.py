"""Benchmarks that need torch: KV reuse, engines against llama.cpp (with the GGUF converter), remote backends."""
