"""The one C extension of the host (ether_host/transport/_struct_wire.c: why it is C is said
there). Optional: where it cannot be built (no C compiler), the install goes on and the host
uses struct_values.py's Python converter, which gives the same values."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ether_host.transport._struct_wire",
            ["ether_host/transport/_struct_wire.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
