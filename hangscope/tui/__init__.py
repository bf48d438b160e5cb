"""The live TUI (``hangscope attach``, ``hangscope show --tui``): renders Snapshots only."""
