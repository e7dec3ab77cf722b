"""redundant-copy: a copy that buys nothing and costs memory or time."""
