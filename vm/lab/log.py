"""One voice for the lab's messages, on stderr so that stdout stays data."""
import sys


def info(message):
    print(f"lab: {message}", file=sys.stderr, flush=True)


def warn(message):
    print(f"lab: warning: {message}", file=sys.stderr, flush=True)
