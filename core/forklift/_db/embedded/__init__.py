"""The embedded server's internals; the public face is :mod:`forklift.embedded`."""
