"""Notebook 07's own material: its explorer and its exercises' checkers."""
