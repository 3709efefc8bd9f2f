"""`python -m regen` is the `regen` command."""

from regen.cli import main

main()
