"""The rules of one worker pool, as a pure state machine: no socket, thread, clock or
process in this package. Events come in as method calls that carry the time, and the rules
answer with actions the shell (``supervisor/local/``, ``cluster/ray_pool.py``) carries out,
so every rule can be tested without a process and both shells obey the same ones.

- ``machine.py``: ``PoolMachine``, its state, its outputs (``take_actions``, ``next_timer``),
  the facts routing reads, and the events it is fed (submit, close, cancel, message,
  progress, send_failed, tick);
- ``starting.py``: a worker's start (spawn, hello, back-off, spares, what it probed);
- ``ending.py``: a worker's end (exit, retiring, restart intensity and cool-down,
  recycling, device recovery);
- ``serving.py``: calls (scheduling, sending, answers, losses, deadlines, pauses);
- ``wording.py``: the errors and descriptions callers and logs see;
- ``slots.py``: a worker slot, a pool's failure, and what the mixins share;
- ``requests.py``: ``Request``; ``actions.py``: what the shell is asked to do;
- ``states.py``: the states and every move between them, as tables;
- ``constants.py``: the limits the rules apply.
"""
