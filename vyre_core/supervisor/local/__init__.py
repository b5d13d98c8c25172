"""The local shell: one backend's workers as processes on this machine, around the rules
of ``supervisor/rules/``. ``pool.py`` holds ``Pool`` (the caller side, the I/O loop,
status and closing); its mixins ``transfer.py`` (a request onto a lane and into shared
memory, a reply back) and ``processes.py`` (spawning, exits, the fork server) hold the
rest, over what ``base.py`` declares they share."""
