"""Notebook 01's own material: its explorer and its exercises' checkers."""
