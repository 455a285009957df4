"""sws: self-aware weakness-driven problem synthesis for RL with verifiable rewards."""

__version__ = "0.1.0"
