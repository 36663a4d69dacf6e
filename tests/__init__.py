"""The test suite, a package so helpers are imported by path (tests.fabric.programs, ...)."""
