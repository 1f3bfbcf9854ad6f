"""Where the project's files are: in a clone of the repository, or inside an installed wheel."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
# An installed wheel carries exercises/ and solutions/ inside the package (see pyproject.toml);
# a clone of the repository (an editable install included) keeps them at its top.
INSTALLED_FROM_WHEEL = (PACKAGE_DIR / "_exercises").is_dir()
EXERCISES_DIR = PACKAGE_DIR / "_exercises" if INSTALLED_FROM_WHEEL else PROJECT_ROOT / "exercises"
SOLUTIONS_DIR = PACKAGE_DIR / "_solutions" if INSTALLED_FROM_WHEEL else PROJECT_ROOT / "solutions"
