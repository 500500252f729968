"""Text after the model: stop rules and clean-up, the copy candidate and its verification, names the workspace spells."""
