"""graph-retention: a tensor still attached to the graph is kept past its step."""
