"""wakeful: an outer loop for always-on AI agents.

Agent-written C watch programs (Loops) compiled to eBPF and run in a sandboxed pure-Python VM.
"""

__version__ = "0.1.0"
