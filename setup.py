"""Build the Cython extensions. Metadata lives in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

MOD_NAMES = ["autobatch._kernels", "autobatch._core"]

extensions = [
    Extension(name, [name.replace(".", "/") + ".pyx"], extra_compile_args=["-O3"])
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
