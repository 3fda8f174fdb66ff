"""Notebook 11's own material: its explorer and its exercises' checkers."""
