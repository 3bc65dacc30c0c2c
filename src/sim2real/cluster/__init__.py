"""cluster stage."""
