"""Notebook 00's own material: its explorer and its exercises' checkers."""
