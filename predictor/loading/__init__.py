"""Which engine runs a model here, and how it loads: engine names, the engine choice, thread counts, the model loaders, GGUF import."""
