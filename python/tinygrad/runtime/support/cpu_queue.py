# The in-order execution queue of a CPU device (runtime/ops_cpu.py) while several CPU devices are in use: one Python thread per device
# runs the device's jobs (kernel launches, copies into its buffers, frees of its buffers) in the order they were submitted, so kernels
# of different devices run at the same time (a kernel is a ctypes call, which releases the GIL while it runs).
#
# Ordering between two queues is by tickets: submit returns the job's ticket (1, 2, ... in submission order) and a job may wait for
# another queue to have completed a ticket (after). Such a wait only ever names a job submitted before the waiting one, so the waits
# can't form a cycle. A job's exception is kept and raised by the next wait() on the queue (Device.synchronize, a read of a buffer);
# the jobs queued behind a failed one are skipped until then, since they may read what it didn't write.
from __future__ import annotations
import collections
import threading
from typing import Any, Callable

NEVER = 1 << 62   # a ticket no queue reaches

class LaunchQueue:
  """Runs submitted jobs in order on a thread of its own, named after the device."""
  def __init__(self, name:str):
    self.name = name
    self._jobs: collections.deque[tuple[Callable[..., Any]|None, tuple]] = collections.deque()
    self._cv = threading.Condition(threading.Lock())
    self.submitted = self.completed = 0   # completed is written by the queue's thread alone
    self._wake_at = NEVER                  # the lowest ticket a thread waits for: the queue's thread wakes the waiters only then
    self._error: BaseException|None = None
    self._idle = False                     # the queue's thread sleeps until a job comes
    self._thread = threading.Thread(target=self._loop, name=f"tinygrad-{name}-queue", daemon=True)
    self._thread.start()

  def submit(self, fn:Callable[..., Any], *args:Any) -> int:
    """Queues fn(*args) behind the jobs submitted before it and returns its ticket."""
    with self._cv:
      self._jobs.append((fn, args))
      self.submitted += 1
      if self._idle: self._cv.notify_all()
      return self.submitted

  def after(self, other:LaunchQueue|None, ticket:int) -> None:
    """Makes this queue's next job wait until `other` has completed `ticket` (None: nothing to wait for)."""
    if other is not None and other is not self and other.completed < ticket: self.submit(other._wait_done, ticket)

  def _wait_done(self, ticket:int) -> None:
    with self._cv: self._wait_locked(ticket)

  def drain(self) -> None:
    """Waits until every job submitted so far has run, leaving an error for the next wait."""
    self._wait_done(self.submitted)

  def _wait_locked(self, ticket:int) -> None:
    while self.completed < ticket:
      self._wake_at = min(self._wake_at, ticket)
      self._cv.wait()

  def wait(self, ticket:int|None=None) -> None:
    """Waits until the job of `ticket` (None: every job submitted so far) has run, then raises the first error a job raised since the
    last wait, if any."""
    with self._cv:
      self._wait_locked(self.submitted if ticket is None else ticket)
      if (err := self._error) is not None:
        self._error = None
        raise err

  def close(self) -> None:
    """Ends the thread after the jobs queued so far (an error left unreported is dropped)."""
    with self._cv:
      self._jobs.append((None, ()))
      if self._idle: self._cv.notify_all()
    if self._thread is not threading.current_thread(): self._thread.join()

  def _loop(self) -> None:
    while True:
      with self._cv:   # every job queued by now, taken at once
        while not self._jobs:
          self._idle = True
          self._cv.wait()
        self._idle = False
        batch = list(self._jobs)
        self._jobs.clear()
      for i, (fn, args) in enumerate(batch):
        if fn is None: return
        try:
          if self._error is None: fn(*args)
        except BaseException as e:   # kept for the caller's next wait
          with self._cv: self._error = e
        batch[i] = fn = args = None   # a job's buffers are released before it counts as done
        with self._cv:
          self.completed += 1
          if self.completed >= self._wake_at:   # (each woken waiter that must wait on sets _wake_at again)
            self._wake_at = NEVER
            self._cv.notify_all()
