"""Sphinx configuration for migrations_policy's documentation."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("_ext"))

project = "migrations_policy"
author = "the migrations_policy developers"
copyright = "2026, the migrations_policy developers"
extensions = ["mp_cli", "sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# "--adopt" in generated descriptions must stay two hyphens, not an en dash.
smartquotes = False
html_static_path = ["_static"]
html_css_files = ["wide_code.css"]
# Wide enough for the CLI reference's help texts; code blocks scroll instead of being cut.
html_theme_options = {"page_width": "1100px", "sidebar_width": "260px"}
exclude_patterns = ["_build"]
html_theme = "alabaster"

# autodoc reads VersionedMixin's declared attributes from the unmapped class: SQLAlchemy warns.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="Unmanaged access of declarative attribute")
