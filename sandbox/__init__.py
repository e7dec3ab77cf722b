"""The torch sandbox: run the code a finding is about, as written and as fixed, in an
isolated child of a warm torch worker, and say what torch did.

The reviewer's process imports only the torch-free modules (`client`, `subjects`,
`recipes`, `verdict`, `isolate`, `protocol`); `zygote`, `child`, `observer` and
`inputs` run in the sandbox's own processes.
"""
