"""The fleet client: inference servers, their health, and dispatching requests to them."""
