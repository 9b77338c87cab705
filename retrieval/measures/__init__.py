"""Pure figures from a Run: metrics, tie-aware expectations, paired comparisons, rank fusion."""
