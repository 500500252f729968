"""The running daemon: the completion service, its scheduler, config, event log, lifecycle and backends."""
