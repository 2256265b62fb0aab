"""Parasol's own functional tests, run in Nova's functional harness like Nova's (real API,
conductor, computes with the fake driver, Placement; `parasol serve` as the scheduler):
`python3 -m nova_functional run --mode parasol nova_functional.parasol_tests`."""
