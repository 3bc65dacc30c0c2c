"""match stage."""
