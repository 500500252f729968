"""tabd daemon: process entry, CLI, config, scheduler, logging and metrics."""
