"""HTTP load test for the graphrecall server (see http_load.py)."""
