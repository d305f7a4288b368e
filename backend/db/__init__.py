"""The results schema and sessions. Web-free: the worker imports it."""
