"""tabd predictor: prompts, FIM templates and model backends. torch stops here."""
