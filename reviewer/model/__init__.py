"""Plain data that flows through a review: what to review and how (`settings`), what the
review says (`findings`), the report and its counts (`report`), and the one error that
ends a run with exit status 2 (`errors`). Imports nothing from the rest of the project."""
