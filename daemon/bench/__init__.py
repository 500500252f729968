"""Benchmarks that need no torch: replay (naive against full server) and soak; `tabd bench` runs them."""
