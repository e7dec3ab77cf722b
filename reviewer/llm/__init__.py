"""The LLM reviewer: prompts built on the copy rules, any OpenAI-compatible model, and
nothing posted that has not been checked against the hunks it was shown.

`stage.llm_stage` is what a review runs when the LLM is on, `stage.offline_stage` when it
is not. Nothing here opens a connection before the stage runs on a change that has tensor
hunks to review.
"""
