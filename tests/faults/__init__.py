"""The fault-injection suite: real worker processes misbehaving on request."""
