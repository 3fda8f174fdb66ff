"""Notebook 04's own material: its explorer and its exercises' checkers."""
