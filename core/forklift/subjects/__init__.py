"""Export and erase of one person's data, with coverage of every marked column checked first."""
