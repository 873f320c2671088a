"""forklift's operator console and command line."""
