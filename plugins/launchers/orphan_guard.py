"""Run a worker command so that it dies with the launcher: ``python orphan_guard.py <launcher pid> <cmd...>``.

Sets the parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``), which survives ``exec``, checks the
launcher did not already die, then becomes the worker command. Run by file path, so it imports nothing but
the standard library and starts in milliseconds. Where prctl does not exist, the worker's watchdog thread
(``plugins.launchers.elastic.watch_launcher``) still ends it within a second of the launcher's death.
"""

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    launcher, command = int(sys.argv[1]), sys.argv[2:]
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != launcher:  # the launcher died before the signal was armed
        sys.exit(1)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
