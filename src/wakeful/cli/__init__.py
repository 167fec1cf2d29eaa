"""The `wakeful` command line (interfaces.md §4): a thin face over the build, VM and runtime layers.

The typer app lives in `wakeful.cli.main`; each command's logic sits in its own module.
"""
