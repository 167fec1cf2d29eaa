"""Benchmarks of wakeful (benchmarks.md): a face like ``cli/``, importing every layer below it.

``wakeful bench density`` lives in ``density.py`` (transports in ``inproc.py``/``stdio.py``, kernels in ``cpu.py``).
"""
