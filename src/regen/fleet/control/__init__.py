"""Live control of a run's fleet: decisions made while it runs, from what the servers show.

How many requests each server holds (`concurrency`: the rule that judges a level from the
output it paid; `tuning`: the windows it reads, per server), which server a prompt goes to
(`affinity`: prompts that share a prefix go where it is cached), and how the run ends
(`endgame`: copies of the last requests on idle servers; `drain` and `forecast`: how long
the tail takes and what is left). The dispatcher (`fleet/dispatch.py`) and generate's run
call into them; they read servers and never dispatch themselves.
"""
