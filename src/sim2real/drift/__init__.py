"""drift stage."""
