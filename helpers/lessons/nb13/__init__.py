"""Notebook 13's own material: its explorer and its exercises' checkers."""
