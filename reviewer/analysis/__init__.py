"""Static facts about one file: no rules, no torch, no I/O.

Reading order: `parse` (one libcst parse, imports, scopes) and `syntax` (small node
questions); `values` and `roots` (what a name may hold, which memory it may share);
`events` (what the walk records); `context`, `interpreter`, `parameters`, `expressions`,
`narrowing` (the walk itself); `semantics/` (what library calls do); `guesses` (every
spelling-based guess, in one place); `facts`, `transforms` and `analyze` (the whole file:
entry points, module constants, pipelines); `queries/` (what rules ask of a flow);
`rewrite` (builders for fixes).
"""
