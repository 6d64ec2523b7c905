"""Agent integrations: how Ultron plugs into the coding agents people use.

``agents`` knows where each agent keeps its settings, hooks, MCP servers, skills and
session logs; ``config_files`` edits those files without disturbing anything Ultron did
not write; ``connect`` installs and removes Ultron; ``hooks`` is what runs when the agent
calls ``ultron hook <agent> <event>``; ``project`` finds the repository a session works in.

The package sits beside the CLI, below it: it talks to a running server over HTTP (with
the standard library, so a hook starts fast) and otherwise only touches files. It never
imports the pipeline's stages.
"""
