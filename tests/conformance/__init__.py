"""Tests of the conformance corpus itself and of each bundled backend against it."""
