"""Build of wattsched: the metadata is in setup.cfg; this file adds the compiled simulation core.

The modules in ``wattsched/_native.py`` (the event engine, EASY, the guard and
the job model) are compiled by Cython in pure-Python mode: the same ``.py``
sources, the same behaviour, about a fifth less time per simulated job. Set
``WATTSCHED_PURE_PYTHON=1`` at install time to skip the compilation; a build
without Cython or a C compiler falls back to pure Python with a warning. At
run time the package uses a compiled module only while its source is the one
it was built from (see ``wattsched/_native.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "src"
MANIFEST = "wattsched/_native.json"


def compiled_modules() -> list[str]:
    """Names of the compiled modules, read from ``wattsched/_native.py`` without importing the package."""
    namespace: dict = {}
    text = (SRC / "wattsched" / "_native.py").read_text()
    start = text.index("COMPILED = ")
    exec(text[start:text.index(")\n", start) + 2], namespace)
    return list(namespace["COMPILED"])


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: a module that does not compile stays pure Python."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1  # the C compiler runs once per module: use every core

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers
            self._warn(f"the compiled simulation core was not built ({exc}); wattsched runs as pure Python")
            return
        built = {}
        for ext in self.extensions:
            if Path(self.get_ext_fullpath(ext.name)).exists():
                built[ext.name] = source_digest(SRC / (ext.name.replace(".", "/") + ".py"))
        # the manifest goes beside the compiled modules: the package tree for a wheel, src/ for an editable install
        for base in {Path(self.build_lib), SRC} if self.inplace else {Path(self.build_lib)}:
            target = base / MANIFEST
            if target.parent.is_dir():
                target.write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._warn(f"{ext.name} was not compiled ({exc}); it runs as pure Python")

    @staticmethod
    def _warn(message: str) -> None:
        print(f"wattsched build: {message}", file=sys.stderr)


def ext_modules() -> list:
    if os.environ.get("WATTSCHED_PURE_PYTHON"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("wattsched build: Cython is not available; wattsched runs as pure Python", file=sys.stderr)
        return []
    paths = [str(Path("src") / (name.replace(".", "/") + ".py")) for name in compiled_modules()]
    # annotation_typing off: a `float` annotation stays a Python object (None, ints and subclasses pass as in
    # CPython); binding on: compiled functions keep their signatures and docstrings for inspect and pydantic.
    exts = cythonize(paths, language_level=3, quiet=True, nthreads=os.cpu_count() or 1,
                     compiler_directives={"annotation_typing": False, "binding": True, "embedsignature": False})
    if os.name == "posix":
        # no fused multiply-add contraction (GCC's default where the target has FMA): the compiled
        # arithmetic rounds as Python's does, so the compiled and pure-Python builds decide alike
        for ext in exts:
            ext.extra_compile_args = [*ext.extra_compile_args, "-ffp-contract=off"]
    return exts


setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
