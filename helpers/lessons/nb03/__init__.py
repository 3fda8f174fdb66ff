"""Notebook 03's own material: its explorer and its exercises' checkers."""
