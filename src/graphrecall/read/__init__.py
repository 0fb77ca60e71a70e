"""Reading from memory: question analysis, the mode-aware Reader and its tools."""
