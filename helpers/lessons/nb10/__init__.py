"""What trained heads learn: a two-layer attention-only transformer on sequences that repeat.

Notebook 10 trains it, finds its previous-token and induction heads, and ablates them.
``data`` makes the sequences, ``model`` is the transformer (built from the course's
``FusedMultiHeadAttention``), ``scores`` measures what each head does, and ``training`` holds the
seeded training run whose result ships as ``weights.pt``.
"""
