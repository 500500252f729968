"""The model backends: the local one (a model in this process) and the remote one (an OpenAI-compatible server) with its wire, their settings, and the local engine's own OpenAI-compatible face."""
