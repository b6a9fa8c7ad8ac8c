"""Harnesses that run real CUDA code; used by tests marked ``gpu``."""
