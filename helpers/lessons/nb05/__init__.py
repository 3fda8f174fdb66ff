"""Notebook 05's own material: its explorer and its exercises' checkers."""
