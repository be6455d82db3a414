"""Plumbing every part shares: settings, errors and results, database URLs and engines,
reflection, the framework's own tables, where each branch stands, the project a command
works on, and running a revision offline.

Imports nothing of the package outside ``core``: every other folder may import it.
"""
