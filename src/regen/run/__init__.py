"""A generation run: its output layout, ledger, writers, manifest, lock and progress."""
