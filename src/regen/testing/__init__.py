"""Test and benchmark aids shipped with regen (fault injection only; never used by a run)."""
