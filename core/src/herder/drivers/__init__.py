"""Built-in drivers."""
