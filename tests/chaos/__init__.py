"""A seeded random fault schedule against a private cluster, audited exactly (see driver.py).

Kept light: the emitter process imports this package and must not load the driver's services.
"""
