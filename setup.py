"""Build settings that pyproject.toml cannot express: the optional compiled sweep.

``astad.runtime._native`` (astad/runtime/_native.c) is built when a C compiler is
available. It is optional: where it cannot be built the install still succeeds and astad
runs its pure-Python sweeps (astad.runtime.tape.RUNTIME says which). ASTAD_BUILD_NATIVE=0
skips it on purpose.

Every build writes its outcome into the built package, astad/runtime/_build.json
({"native": "built" | "failed: REASON" | "skipped (ASTAD_BUILD_NATIVE=0)"}), and prints it:
pip shows a build's output only with -v, so astad itself warns at import when the build
failed (astad/runtime/build_record.py) and `python -m astad info` reports it.
"""
import json
import os
import sys

from setuptools import Command, Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext

RECORD = os.path.join("astad", "runtime", "_build.json")
SKIP = os.environ.get("ASTAD_BUILD_NATIVE", "1").strip().lower() in ("0", "no", "false")
outcome = {"native": "skipped (ASTAD_BUILD_NATIVE=0)" if SKIP else "built"}


class BuildExt(build_ext):
    """No floating-point contraction: a fused multiply-add would round ``adjoint + a * g``
    once where Python rounds twice, and the compiled sweep must give Python's bits."""

    def build_extensions(self):
        if self.compiler.compiler_type != "msvc":  # MSVC does not contract by default
            for extension in self.extensions:
                extension.extra_compile_args += ["-ffp-contract=off"]
        super().build_extensions()

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:  # setuptools warns and goes on (optional=True)
            outcome["native"] = f"failed: {type(error).__name__}: {error}"
            raise


class BuildRecord(Command):
    """A step of every build (plain and editable): the record of what it built, beside the
    package's modules. A sub-command of `build`, not an override of build.run: an editable
    install runs the sub-commands one by one, never build.run."""
    description = "record whether astad's compiled sweep was built"
    user_options: list = []

    def initialize_options(self):
        self.build_lib = None
        self.editable_mode = False  # set by setuptools' editable_wheel
        self.outputs = []

    def finalize_options(self):
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    def run(self):
        # an editable install imports the package from the checkout (where the extension
        # is copied too), so the record goes there
        self.outputs = [RECORD if self.editable_mode else os.path.join(self.build_lib, RECORD)]
        for target in self.outputs:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w") as file:
                json.dump({**outcome, "python": sys.version.split()[0]}, file)
        status = outcome["native"]
        message = f"astad: the compiled sweep (astad.runtime._native): {status}"
        if status.startswith("failed"):
            message += ("\nastad: installed without it; astad runs its pure-Python sweeps "
                        "(same results, slower). To build it, install a C compiler and "
                        "Python's headers (python3-dev) and reinstall.")
        print(message, file=sys.stderr)

    def get_outputs(self):
        return self.outputs


class Build(build):
    sub_commands = build.sub_commands + [("build_record", None)]


native = Extension("astad.runtime._native",
                   ["astad/runtime/_native.c", "astad/runtime/_specialised.c",
                    "astad/runtime/_elementwise.c", "astad/runtime/_jvp.c",
                    "astad/runtime/_float_tape.c"],
                   depends=["astad/runtime/_native.h"], optional=True)
setup(ext_modules=[] if SKIP else [native], cmdclass={"build_ext": BuildExt, "build": Build,
                                                      "build_record": BuildRecord})
