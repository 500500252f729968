"""The `tabd` command entry points: one module per subcommand, each with add_arguments and run."""
