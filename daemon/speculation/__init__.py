"""Speculation policy: which states after an accept to compute, and how deep measured acceptance says to go."""
