"""Why questions fail (recall or ranking failure), which remedy reaches them, what-if sweeps."""
