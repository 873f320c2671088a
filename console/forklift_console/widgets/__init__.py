"""Widgets and text helpers the console's screens share."""
