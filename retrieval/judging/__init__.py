"""Judging: the depth-k pool of unjudged pairs, the local judging page, spreadsheets, the LLM judge."""
