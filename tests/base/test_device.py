# The device registry: names, Device.DEFAULT from DEV/DEVICE, renderer selection; no compiler needed (PYTHON and NULL devices).
import os
import subprocess
import sys
import pytest
from tinygrad.device import Device, Compiled, canonicalize_device
from tinygrad.helpers import Context, DEV
from tinygrad.renderer.python import PythonRenderer

def test_canonicalize():
  assert Device.canonicalize("cpu") == "CPU" and Device.canonicalize("CPU:0") == "CPU" and Device.canonicalize("cpu:1") == "CPU:1"
  assert canonicalize_device(("python", "python:1")) == ("PYTHON", "PYTHON:1") and canonicalize_device(["null"]) == "NULL"
  with pytest.raises(TypeError, match="must be a str"): Device.canonicalize(3)
  with pytest.raises(ValueError, match="cannot be empty"): Device.canonicalize("")

def test_devices_are_opened_once():
  assert Device["python"] is Device["PYTHON:0"] and isinstance(Device["PYTHON"], Compiled)
  assert Device["PYTHON"].device == "PYTHON" and "PYTHON" in Device._opened_devices
  assert "python" in Device and "FOO" not in Device

def test_unknown_device():
  with pytest.raises(RuntimeError, match=r"unknown device 'FOO', the devices are CPU, CUDA, DISK, NULL, PYTHON"): Device["foo"]

def test_default_follows_dev_then_device(monkeypatch):
  monkeypatch.delenv("DEVICE", raising=False)
  with Context(DEV=""): assert Device.DEFAULT == "CPU"
  with Context(DEV="python"): assert Device.DEFAULT == "PYTHON" and Device.default is Device["PYTHON"]
  monkeypatch.setenv("DEVICE", "null")
  with Context(DEV=""): assert Device.DEFAULT == "NULL"
  with Context(DEV="PYTHON"): assert Device.DEFAULT == "PYTHON"  # DEV wins over DEVICE
  assert Device.canonicalize(None) == Device.DEFAULT

def test_default_from_the_environment():
  env = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEVICE")}
  code = "from tinygrad.device import Device; print(Device.DEFAULT)"
  outs = [subprocess.check_output([sys.executable, "-c", code], env={**env, **e}, text=True).strip()
          for e in ({}, {"DEV": "PYTHON"}, {"DEVICE": "null"})]
  assert outs == ["CPU", "PYTHON", "NULL"]

def test_default_cant_be_assigned():
  with pytest.raises(AttributeError, match=r"Context\(DEV='PYTHON'\)"): Device.DEFAULT = "PYTHON"

def test_renderer_selection():
  assert isinstance(Device["PYTHON"].renderer, PythonRenderer)
  assert Device["PYTHON"].renderer is Device["PYTHON"].renderer  # built once per target
  with Context(DEV="PYTHON:FOO"):
    with pytest.raises(RuntimeError, match="PYTHON has no renderer 'FOO'"): Device["PYTHON"].renderer
  assert DEV.device == "" or DEV.device

def test_allow_device_usage():
  with Context(ALLOW_DEVICE_USAGE=0):
    with pytest.raises(RuntimeError, match="usage of device NULL is disallowed"): Device["NULL"]
    assert Device["PYTHON"]

def test_lru_cache_returns_huge_allocations_to_the_runtime():
  from tinygrad.device import LRUAllocator
  freed = []
  class Fake(LRUAllocator):
    def _alloc(self, size, options): return bytearray(1)
    def _free(self, opaque, options): freed.append(opaque)
  a = Fake(None)
  small, huge = a.alloc(1024), a.alloc(a.max_cached_size + 1)
  a.free(small, 1024)
  a.free(huge, a.max_cached_size + 1)
  assert freed == [huge] and a.alloc(1024) is small
