// Published-run validation (filled in by the simulator work).
