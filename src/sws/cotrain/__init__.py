"""SynCo-style co-training: a trainable synthesizer and the reasoner updated by GRPO in one online loop."""
