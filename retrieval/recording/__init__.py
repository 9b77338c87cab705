"""Recording and replay: cassettes, the vector store, ranking cassettes, closed network, drift."""
