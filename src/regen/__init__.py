"""regen: build speculative-decoding drafter training data from a target model's own answers."""

__version__ = "0.1.0"
