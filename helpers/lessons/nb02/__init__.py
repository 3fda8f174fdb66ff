"""Notebook 02's own material: its explorer and its exercises' checkers."""
