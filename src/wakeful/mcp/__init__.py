"""wakeful.mcp: the MCP face — the Loop, script and embedder tools over stdio and streamable HTTP.

Imports harness and control, never the other faces (api, cli, bench). docs/decisions-mcp.md: adding tools.
"""
