"""Started through PYTHONPATH by Relay's Lightning compatibility mode: child processes serve Lightning too."""

import os
import sys

if os.environ.get("RELAY_LIGHTNING_COMPAT") == "1":
    from trainer.lightning_compat import install

    install(children=False)

# Run the sitecustomize this one hides, if there is one further along the path.
_here = os.path.dirname(os.path.abspath(__file__))
_mine = sys.modules.pop("sitecustomize", None)
_saved = list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    import sitecustomize  # noqa: F401
except ImportError:
    pass
finally:
    sys.path[:] = _saved
    if "sitecustomize" not in sys.modules and _mine is not None:
        sys.modules["sitecustomize"] = _mine
