"""What a run is made of, as plain data: rankings, usage and cost, method declarations, the Run itself."""
