"""The live pipeline: discovery, sampling rounds, refresh, watch."""
