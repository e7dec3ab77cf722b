"""The sandbox, torch's side: code that runs only in the worker's processes. The warm
worker (`zygote`) imports torch once and forks an isolated probe process per request; that
process loads the subject (`load`), finds inputs it runs with (`inputs`, `search`), runs
the original and the fix under the observer (`runner`, `observe`), and answers with what
it measured (`check`). CUDA requests exec a fresh interpreter (`cuda_child`)."""
