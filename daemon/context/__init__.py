"""Workspace context: the chunks of other files and edits put before the prompt, and which to pick."""
