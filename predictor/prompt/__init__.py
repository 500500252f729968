"""Prompt building: FIM formats and templates, prompts as text and as token ids, the editor's closers, next-edit prompts."""
