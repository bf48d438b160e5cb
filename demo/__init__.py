"""Demo programs that really hang, for trying out and testing hangscope.

Each runs as ``python -m hangscope.demo.NAME`` or ``python demo/NAME.py``:
``mismatch`` (gloo all_reduce vs all_gather), ``sglang_like`` (SGLang-style
server stuck in TP warm-up), ``deadlock`` (two threads, lock order),
``straggler`` (one rank spinning in Python). ``hangscope.demo.jobs`` starts
them and waits until they are hung.
"""
