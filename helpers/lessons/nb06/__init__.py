"""Notebook 06's own material: its explorer and its exercises' checkers."""
