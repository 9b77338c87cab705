"""Where searches run: in this process, or sharded over a Ray cluster with the same tie rule."""
