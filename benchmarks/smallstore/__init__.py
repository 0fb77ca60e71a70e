"""Small-store retrieval benchmark: short hand-written personal histories and conversational questions."""
