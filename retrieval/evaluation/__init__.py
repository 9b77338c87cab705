"""Runs the configured methods in dependency order into a Run: shared embeddings, channels, recording."""
