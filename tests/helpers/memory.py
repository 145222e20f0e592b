# The memory planner's invariant, checked on a schedule: no two buffers live at once share bytes.

def check_no_live_overlap(items) -> int:
  """Fails if two distinct buffers used at the same time by the schedule `items` share memory. A view of an arena is live from the
  first to the last item that uses it; any other buffer (an input, an output, an assign target, an unplanned intermediate) counts as
  live through the whole schedule. Returns how many arena views the schedule uses."""
  span: dict[int, list] = {}
  for i, si in enumerate(items):
    for b in si.bufs:
      span.setdefault(id(b), [b, i, i])[2] = i
  n = len(items)
  ranges = []
  for b, first, last in span.values():
    if b._base is None: first, last = 0, n - 1
    ranges.append((b, first, last, id(b.base), b.offset if b._base is not None else 0))
  for i, (b1, f1, l1, m1, o1) in enumerate(ranges):
    for b2, f2, l2, m2, o2 in ranges[:i]:
      if m1 == m2 and f1 <= l2 and f2 <= l1 and o1 < o2 + b2.nbytes and o2 < o1 + b1.nbytes:
        raise AssertionError(f"{b1!r} (items {f1}..{l1}) and {b2!r} (items {f2}..{l2}) are live at once in the same memory")
  return sum(1 for r in ranges if r[0]._base is not None)
