"""Stand-in for llama-cpp-python: `python -m llama_cpp.server` runs the stand-in engine."""
