"""The repository index: small facts about the functions and classes of the whole
repository, read once per file content and cached on disk, that rules ask for instead of
guessing (`RepoIndex`)."""
