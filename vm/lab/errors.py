class LabError(Exception):
    """A failure the user can act on; main() prints it without a traceback."""
