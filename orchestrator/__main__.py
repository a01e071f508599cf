from orchestrator.cli import console

# Guarded: a fork-server or spawned child process imports the parent's main module again.
if __name__ == "__main__":
    console()
