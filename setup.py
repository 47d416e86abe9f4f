"""Build the Cython extensions. Metadata lives in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

MOD_NAMES = ["autobatch._kernels", "autobatch._core", "autobatch._kernels_conv"]

extensions = [
    # -fno-trapping-math: nothing here enables floating-point traps, and without it
    # GCC will not turn the selects of the elementwise kernels into vector blends
    Extension(name, [name.replace(".", "/") + ".pyx"], include_dirs=["autobatch"],
              extra_compile_args=["-O3", "-fno-trapping-math"])
    for name in MOD_NAMES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
        },
    ),
)
