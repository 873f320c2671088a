"""forklift's version: the package's ``__version__``, the version a worker registers on its
row, and the version its tracer reports."""

VERSION = "0.1.0"
