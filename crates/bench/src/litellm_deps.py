"""Prints the requirements of the installed litellm wheel plus its `proxy` extra, one per line, with
certifi pinned to a release the registry has (litellm declares a newer one than exists here).
Run with the virtual environment's python after `pip install --no-deps litellm==VERSION`."""
import sys
from importlib.metadata import distribution

try:
    from packaging.requirements import Requirement
except ImportError:  # pip always vendors it
    from pip._vendor.packaging.requirements import Requirement

CERTIFI = "certifi==2026.10.18"

out = []
for line in distribution("litellm").requires or []:
    req = Requirement(line)
    if req.marker is not None and not (
        req.marker.evaluate({"extra": ""}) or req.marker.evaluate({"extra": "proxy"})
    ):
        continue
    if req.name == "certifi":
        out.append(CERTIFI)
        continue
    req.marker = None
    out.append(str(req))
sys.stdout.write("\n".join(sorted(set(out))) + "\n")
