# A package so that pytest's prepend import mode puts the repository root on sys.path (through tests/conftest.py) and the shared
# helpers import as `tests.helpers.*` under `pytest` as well as `python -m pytest`. The folders below stay rootless test directories.
