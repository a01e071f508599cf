"""Running sessions: the engine that claims a session and drives its LangGraph graph, the
graph and its state, checkpoints, agent backends, leases, and the worker loop."""
