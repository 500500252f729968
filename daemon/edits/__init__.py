"""Next-edit suggestions: what the user changed lately, and the edit that follows from it (no LSP, no torch)."""
