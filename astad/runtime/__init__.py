"""The runtime: duals and levels, the tape and its sweep, array duals, calls known at run time."""
