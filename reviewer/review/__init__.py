"""The review of a change set: one file at a time through the rules (`engine`), over the
whole change (`static`), then through the further stages (`pipeline`). Also what the
stages share: fixes as line suggestions (`fixes`), `# review-copies: ignore` comments
(`suppression`), and the tensor hunks the LLM is shown (`hunks`)."""
