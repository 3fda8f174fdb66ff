"""Notebook 12's own material: its explorer and its exercises' checkers."""
