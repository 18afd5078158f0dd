"""The read layer: the state a decision needs, loaded by the handlers (one module per concept)."""
