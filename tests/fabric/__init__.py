"""Engine tests against exact cycle counts and invariants."""
