"""Errors that end a run with exit status 2 and a one-line message."""


class UsageError(Exception):
    """Bad usage or bad input: not a repository, unknown revision, unreadable diff, bad config.

    The message is shown to the user as one line, prefixed with the program name.
    """

    def __str__(self) -> str:
        text = super().__str__()
        return " ".join(text.split()) if text else "usage error"
