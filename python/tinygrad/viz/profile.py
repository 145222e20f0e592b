"""Reading a profile (the Chrome trace tinygrad.helpers.save_profile writes) into the timeline the VIZ page draws: one row per device."""
from __future__ import annotations
import json

class ProfileError(ValueError):
  """The file is not a profile the viewer can read."""

def load_profile(path:str) -> dict:
  """{"devices": [{"name", "events": [{"name", "cat", "st", "dur"}, ...] by start}], "t0", "t1"} (times in us, t0 the first start);
  ProfileError naming the file if it is not a Chrome trace of complete events."""
  try:
    with open(path, "rb") as f: trace = json.load(f)
  except (ValueError, RecursionError) as e: raise ProfileError(f"{path} is not a profile (a Chrome trace JSON): {e}") from None
  events = trace.get("traceEvents") if isinstance(trace, dict) else None
  if not isinstance(events, list): raise ProfileError(f"{path} is not a profile: no traceEvents list")
  names: dict[int, str] = {}
  rows: dict[int, list[dict]] = {}
  for e in events:
    if not isinstance(e, dict) or not isinstance(e.get("pid"), int): raise ProfileError(f"{path}: malformed trace event {str(e)[:60]}")
    if e.get("ph") == "M" and e.get("name") == "process_name": names[e["pid"]] = str((e.get("args") or {}).get("name", e["pid"]))
    elif e.get("ph") == "X":
      if not all(isinstance(e.get(k), (int, float)) for k in ("ts", "dur")): raise ProfileError(f"{path}: event without ts/dur: {str(e)[:60]}")
      rows.setdefault(e["pid"], []).append({"name": str(e.get("name", "")), "cat": str(e.get("cat", "other")), "st": e["ts"], "dur": e["dur"]})
  starts = [ev["st"] for evs in rows.values() for ev in evs]
  t0 = min(starts, default=0.0)
  t1 = max((ev["st"] + ev["dur"] for evs in rows.values() for ev in evs), default=0.0)
  devices = [{"name": names.get(pid, f"device {pid}"), "events": sorted(evs, key=lambda ev: ev["st"])} for pid, evs in sorted(rows.items())]
  return {"devices": devices, "t0": t0, "t1": t1}
