"""vyre_workers: the worker-process host. It loads exactly one backend plugin behind the
frozen contract and serves it over ZeroMQ; it never reaches into the parent's state."""
