"""alias-mutation: an in-place write through one name changes a tensor other code still
reads through another name."""
