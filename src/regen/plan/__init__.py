"""`regen plan`: how long a run will take and what it will cost, before it starts and while
it runs. A seeded, stratified sample of the real prompts goes through the same client path as
`regen generate` (`sample`, `calibrate`); per-server latency models fitted to what came back
(`measure`) drive a simulation of the whole file's dispatch, with a bootstrap range
(`estimate`). `sweep` compares per-server concurrencies; `from_run` re-estimates a run in
progress with the estimator that `regen status` uses.
"""
