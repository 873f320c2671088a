"""The console's screens: one module per screen, plus the shared base, dialogs and help."""
