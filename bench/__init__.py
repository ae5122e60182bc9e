"""Benchmarks that print figures; run with `make bench`. Not tests: nothing here asserts timing."""
