"""attribute stage."""
