"""The LLM reviewer's prompts and answer schema, kept as data files.

This package holds no code: `reviewer.llm.prompts` reads the files next to this one
with importlib.resources, so they ship inside the wheel.
"""
