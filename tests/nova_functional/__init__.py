"""Nova's own functional tests with Parasol as the scheduler: see README.md here.

Nothing is imported here: the parent (`python -m nova_functional`) runs on the standard
library, the workers in the cached virtualenv, where `nova.tests` must be imported first.
"""
