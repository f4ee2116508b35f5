"""The conformance suite: adapter protocol, lockstep machine, history checker, certify."""
