"""Build settings that pyproject.toml cannot express: the optional compiled sweep.

``astad.runtime._native`` (astad/runtime/_native.c) is built when a C compiler is
available. It is optional: where it cannot be built the install still succeeds and astad
runs its pure-Python sweeps (astad.runtime.tape.RUNTIME says which). ASTAD_BUILD_NATIVE=0
skips it on purpose.
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    """No floating-point contraction: a fused multiply-add would round ``adjoint + a * g``
    once where Python rounds twice, and the compiled sweep must give Python's bits."""

    def build_extensions(self):
        if self.compiler.compiler_type != "msvc":  # MSVC does not contract by default
            for extension in self.extensions:
                extension.extra_compile_args += ["-ffp-contract=off"]
        super().build_extensions()


native = Extension("astad.runtime._native",
                   ["astad/runtime/_native.c", "astad/runtime/_specialised.c",
                    "astad/runtime/_elementwise.c", "astad/runtime/_jvp.c"],
                   depends=["astad/runtime/_native.h"], optional=True)
build = os.environ.get("ASTAD_BUILD_NATIVE", "1").strip().lower() not in ("0", "no", "false")
setup(ext_modules=[native] if build else [], cmdclass={"build_ext": BuildExt})
