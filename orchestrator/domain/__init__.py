"""The pure domain: the gate's decision, questions, replies, answers, expectations and the
clock. No I/O, no database, no model provider; everything above builds on it."""
