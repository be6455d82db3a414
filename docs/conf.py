"""Sphinx configuration for migrations_policy's documentation."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("_ext"))

project = "migrations_policy"
author = "the migrations_policy developers"
copyright = "2026, the migrations_policy developers"
extensions = ["mp_cli", "sphinx.ext.autodoc", "sphinx_copybutton"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# "--adopt" in generated descriptions must stay two hyphens, not an en dash.
smartquotes = False
exclude_patterns = ["_build", "_diagrams"]

# furo: one column on a phone, sidebars on a laptop; light and dark follow the reader's setting.
html_theme = "furo"
html_title = "migrations_policy"
html_static_path = ["_static"]
html_css_files = ["wide_code.css"]

# Copy buttons copy the command, not the prompt: "$ " (console blocks) and ">>> " / "... "
# (Python sessions) are stripped, and only the lines that carry a prompt are copied, so a
# console block's output is left out too.  Blocks without any prompt are copied whole.
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True
copybutton_remove_prompts = True

# autodoc reads VersionedMixin's declared attributes from the unmapped class: SQLAlchemy warns.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="Unmanaged access of declarative attribute")
