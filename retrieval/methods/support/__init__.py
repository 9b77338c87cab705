"""What methods share that is not a method: the LLM calls, the shard protocol, shard searches, the
vector search's optional compiled kernel."""
