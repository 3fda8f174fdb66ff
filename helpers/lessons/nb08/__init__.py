"""Notebook 08's own material: its explorer and its exercises' checkers."""
