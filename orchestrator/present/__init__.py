"""What people read: the texts that the command line, the web inbox and the MCP server
show for sessions, questions and events (standard library only, no I/O)."""
