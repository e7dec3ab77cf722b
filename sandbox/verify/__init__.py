"""The sandbox, reviewer's side (no torch): what to run for a finding (`subjects`, with
`param_facts` for building its inputs), the warm worker's handle (`client`), from what the
worker measured to a verdict (`verdict`), and the review stage that ties them (`stage`)."""
