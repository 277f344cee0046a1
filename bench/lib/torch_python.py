"""The interpreter that runs the plain-PyTorch side of the bench/worker comparisons.

torch_python(explicit, modules, setup_hint): --python when given, else the first of this
interpreter, the repository's .venv (scripts/setup.sh) and python3 that imports every
module of `modules`; exits saying what is missing when none does. Python 3 standard library.
"""
import os
import shutil
import subprocess
import sys

REPO_VENV = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".venv")


def torch_python(explicit, modules, setup_hint):
    candidates = [explicit] if explicit else [sys.executable, os.path.join(REPO_VENV, "bin", "python"), "python3"]
    for py in candidates:
        if py and shutil.which(py) and subprocess.run(
                [py, "-c", "import " + ", ".join(modules)], capture_output=True).returncode == 0:
            return py
    names = modules[0] if len(modules) == 1 else ", ".join(modules[:-1]) + " and " + modules[-1]
    sys.exit(f"no Python interpreter here imports {names} ({setup_hint}; or pass --python)")
