"""Ten kernels of a public suite, ported to vyre and to Warp (issue 36)."""
