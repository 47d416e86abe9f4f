"""Sphinx configuration of the documentation site: the pages of docs/*.md (MyST) and an
API reference made by autodoc from the docstrings of the built extension.

    pip install ".[docs]" && sphinx-build -W --keep-going -b html docs docs/_build/html

The API page lists whatever `autobatch` makes public when the docs are built
(_ext/apiref.py), so a new name appears there without editing any page.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

import autobatch  # noqa: E402  (the installed, built package: autodoc reads its docstrings)

project = "autobatch"
author = "the autobatch authors"
copyright = "the autobatch authors"
release = version = autobatch.__version__

extensions = ["sphinx.ext.autodoc", "myst_parser", "apiref"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# `name` in a docstring is code, as in the Markdown pages
default_role = "code"
# the first docstring line that Cython's embedsignature writes is the signature
autodoc_docstring_signature = True
autodoc_member_order = "alphabetical"
autodoc_typehints = "none"        # the .pyi stubs carry the types; signatures show names

myst_heading_anchors = 3          # links such as distributed.md#measured
html_theme = "alabaster"
html_title = f"autobatch {release}"
