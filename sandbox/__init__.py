"""The torch sandbox: run the code a finding is about, as written and as fixed, in an
isolated process, and say what torch did. Two processes, two packages:

- `verify` runs in the reviewer's process and never imports torch;
- `worker` runs only in the sandbox's own processes (it imports torch);
- they share only `protocol` (typed messages and frames), `recipes` (what to measure for a
  kind of bug, and how to decide) and `isolate` (how a probe process is confined).
"""
