"""The device runtimes: ops_<name>.py defines <Name>Device for Device["<NAME>"].

Every ops_*.py file here is registered with the Device registry (a new runtime is a new file), imported on the first use of its
device. The default device (no DEV or DEVICE) is a usable GPU, else the CPU."""
import importlib
import inspect
import pathlib
from typing import Callable
from tinygrad.device import Device, Compiled

def _loader(name:str) -> Callable[[], type[Compiled]]:
  def load() -> type[Compiled]:
    module = importlib.import_module(f"tinygrad.runtime.ops_{name.lower()}")
    return next(cls for cname, cls in inspect.getmembers(module) if cname.lower() == name.lower() + "device")
  return load

def _cuda_usable() -> bool:
  # asked of ops_cuda at call time, which says so without importing cuda-python where it is not installed
  return importlib.import_module("tinygrad.runtime.ops_cuda").cuda_usable()

DEFAULT_CANDIDATES: dict[str, tuple[int, Callable[[], bool]]] = {"CUDA": (0, _cuda_usable), "CPU": (1, lambda: True)}

for _path in sorted(pathlib.Path(__file__).parent.glob("ops_*.py")):
  _name = _path.stem.removeprefix("ops_").upper()
  _rank, _usable = DEFAULT_CANDIDATES.get(_name, (None, lambda: True))
  Device.register(_name, _loader(_name), _rank, _usable)
