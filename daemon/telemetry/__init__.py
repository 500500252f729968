"""Telemetry: reading daemon logs, the latency dashboard, and Prometheus metrics (with a Grafana board in assets/)."""
