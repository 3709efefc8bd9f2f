"""The skip signal, and nothing else."""

from __future__ import annotations

from regen.errors import InputError


class Skip(InputError):
    """A record that converts fine but is deliberately left out (an auxiliary API call, or a
    request that a later request of the same session contains). Counted and written to the
    rejects file like a reject, but reported apart: it is not something the user must fix."""
