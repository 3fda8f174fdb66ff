"""Notebook 09's own material: its explorer and its exercises' checkers."""
