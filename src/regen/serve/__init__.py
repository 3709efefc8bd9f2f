"""Servers regen starts and watches: `regen serve` for a whole fleet, and the embedded model of
`regen generate` (the same code with one llama.cpp replica).

    engines.py     the launcher and command line of one server, per engine
    gpus.py        nvidia-smi: which GPUs exist and are free; groups per server
    launch.py      preflight, start every server, wait for a real completion
    process.py     one server process: start, readiness, exit report, stop by pid
    supervisor.py  the watch state machine: notice exits, restart with backoff, give up
    keeper.py      the one place that starts, watches, restarts and stops server processes
    auth.py        the API key regen sends to the servers it starts, and where it came from
    fleetfile.py   FLEET.json
    control.py     --status and --stop of a FLEET.json
    run.py         `regen serve` as a library call
"""
