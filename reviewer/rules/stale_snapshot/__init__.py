"""stale-snapshot: a "copy" that is really a reference and changes later under it."""
