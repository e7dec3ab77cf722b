"""What to review: the change, read with git (working tree, revisions, merge bases) or from
a unified diff (`diff`), as a stream of changed files and a way to read each one's new
version (`changes`). Nothing here writes to the reviewed repository."""
