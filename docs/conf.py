"""Sphinx configuration for migrations_policy's documentation."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("_ext"))

project = "migrations_policy"
author = "the migrations_policy developers"
extensions = ["mp_cli"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
