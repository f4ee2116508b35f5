"""Real-process fault injection: failpoints, the psutil killer, systematic enumeration."""
