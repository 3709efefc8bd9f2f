"""Running one generation across many machines: which part of the input is whose
(`partition`), and executors that start the parts (`ray_executor`). The run itself only
sees a `Part` (index and count), never the machinery that started it."""
